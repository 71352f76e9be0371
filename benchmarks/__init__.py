"""Speed and cost benchmarks; `make bench` writes their results into docs/ (benchmarks.run)."""

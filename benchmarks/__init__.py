"""Speed and cost benchmarks; `make bench` writes their results into the README."""

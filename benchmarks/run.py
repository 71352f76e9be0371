"""``make bench``: run every benchmark and write the results into the README between markers."""

from __future__ import annotations

import argparse
import platform
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import (
    chaos_soak,
    demo_duration,
    effects,
    host_memory,
    import_time,
    jobs_requests,
    local_memory,
    pooled_scale,
    pooled_soak,
    reconciler_scale,
    rollout_scale,
    tasks_requests,
)

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 10,000-observer pass")
    parser.add_argument("--no-write", action="store_true", help="print only; leave README.md")
    args = parser.parse_args()
    sections: list[tuple[str, Callable[[], str]]] = [
        ("`make demo`: seconds after set-up", demo_duration.run),
        ("Scheduled jobs: DynamoDB requests", jobs_requests.run),
        ("Scheduled jobs: import time of a job module", import_time.run),
        ("Effects: requests per fenced write, import cost", effects.run),
        ("Tasks: requests, cost and time", lambda: tasks_requests.run(quick=args.quick)),
        (
            "Scheduled jobs: chaos soak",
            lambda: chaos_soak.run(ticks=1_000 if args.quick else chaos_soak.BENCH_TICKS),
        ),
        ("Observers: reconciler passes", lambda: reconciler_scale.run(quick=args.quick)),
        ("Observers: pooled hosts", lambda: host_memory.run(quick=args.quick)),
        ("Observers: rollouts and rebalances", rollout_scale.run),
        ("Pooled observers: passes, failover, cost", lambda: pooled_scale.run(quick=args.quick)),
        ("Pooled observers: a seeded soak", lambda: pooled_soak.run(quick=args.quick)),
        ("The local stack: memory", lambda: local_memory.run(minutes=10 if args.quick else 60)),
    ]
    parts = [
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {platform.machine()}, Python "
        f"{platform.python_version()}, {_cpus()} cores, moto in-process (`make bench`)."
    ]
    for title, bench in sections:
        started = time.perf_counter()
        body = bench()
        parts.append(f"#### {title}\n\n{body}\n\n_({time.perf_counter() - started:.0f} s to run)_")
        print(parts[-1], flush=True)
    if not args.no_write:
        _write("\n\n".join(parts))


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def _write(results: str) -> None:
    text = README.read_text()
    block = f"{START}\n{results}\n{END}"
    if START in text:
        text = re.sub(f"{re.escape(START)}.*?{re.escape(END)}", lambda _: block, text, flags=re.S)
    else:
        text += f"\n{block}\n"
    README.write_text(text)


if __name__ == "__main__":
    main()

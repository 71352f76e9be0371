"""``make bench``: run every benchmark and write each result into the docs between its markers.

Each section has its own markers, ``<!-- bench:SLUG:start -->`` and ``<!-- bench:SLUG:end -->``,
in whichever page of ``docs/`` shows it (most in ``docs/benchmarks.md``; the idle cost in the
deploying guide), so ``--only SLUG`` reruns one section and leaves the others as they were
measured. A section whose markers no page holds is added at the end of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import (
    chaos_soak,
    console_requests,
    demo_duration,
    effects,
    flows_requests,
    flows_soak,
    host_memory,
    idle_cost,
    import_time,
    jobs_requests,
    local_memory,
    operators_scale,
    pooled_scale,
    pooled_soak,
    reconciler_scale,
    rollout_scale,
    scale_layout,
    tasks_control,
    tasks_requests,
    tasks_soak,
    tasks_wait,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE = DOCS / "benchmarks.md"
"""Where a section without markers anywhere is added."""


@dataclass(frozen=True)
class Section:
    slug: str
    title: str | None
    """The section's heading; None where the page's own heading introduces it."""
    bench: Callable[[argparse.Namespace], str]


SECTIONS = (
    Section("demo", "`make demo`: seconds after set-up", lambda a: demo_duration.run()),
    Section("jobs-requests", "Scheduled jobs: DynamoDB requests", lambda a: jobs_requests.run()),
    Section(
        "import-time", "Scheduled jobs: import time of a job module", lambda a: import_time.run()
    ),
    Section("effects", "Effects: requests per fenced write, import cost", lambda a: effects.run()),
    Section(
        "tasks-requests",
        "Tasks: requests, cost and time",
        lambda a: tasks_requests.run(quick=a.quick),
    ),
    Section("tasks-wait", "Tasks: requests and dollars per wait", lambda a: tasks_wait.run()),
    Section(
        "tasks-control",
        "Tasks: bulk enqueue, rate limits and priorities",
        lambda a: tasks_control.run(quick=a.quick),
    ),
    Section(
        "tasks-soak",
        "Tasks: chaos soak",
        lambda a: tasks_soak.run(tasks=1_000 if a.quick else tasks_soak.BENCH_TASKS),
    ),
    Section(
        "chaos-soak",
        "Scheduled jobs: chaos soak",
        lambda a: chaos_soak.run(ticks=1_000 if a.quick else chaos_soak.BENCH_TICKS),
    ),
    Section(
        "reconciler-scale",
        "Observers: reconciler passes",
        lambda a: reconciler_scale.run(quick=a.quick),
    ),
    Section("host-memory", "Observers: pooled hosts", lambda a: host_memory.run(quick=a.quick)),
    Section("rollout-scale", "Observers: rollouts and rebalances", lambda a: rollout_scale.run()),
    Section(
        "pooled-scale",
        "Pooled observers: passes, failover, cost",
        lambda a: pooled_scale.run(quick=a.quick),
    ),
    Section(
        "pooled-soak", "Pooled observers: a seeded soak", lambda a: pooled_soak.run(quick=a.quick)
    ),
    Section(
        "local-memory",
        "The local stack: memory",
        lambda a: local_memory.run(minutes=10 if a.quick else 60),
    ),
    Section("idle-cost", None, lambda a: idle_cost.run()),
    Section(
        "scale",
        "Scale: 200 jobs, 200 tasks and 20 kinds",
        lambda a: scale_layout.run(),
    ),
    Section(
        "operators",
        "Operators at 200 jobs and 200 tasks",
        lambda a: operators_scale.run(),
    ),
    Section(
        "console",
        "The console: requests and milliseconds a view",
        lambda a: console_requests.run(quick=a.quick),
    ),
    Section("flows-requests", "Flows: requests and cost", lambda a: flows_requests.run()),
    Section(
        "flows-soak",
        "Flows: chaos soak",
        lambda a: flows_soak.run(flows=50 if a.quick else flows_soak.BENCH_FLOWS),
    ),
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 10,000-observer pass")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ as is")
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=None,
        metavar="SLUG[,SLUG]",
        help=f"run only these sections: {', '.join(s.slug for s in SECTIONS)}",
    )
    args = parser.parse_args(argv)
    chosen = chosen_sections(args.only)
    for section in chosen:
        started = time.perf_counter()
        body = section.bench(args)
        block = render(section, body, time.perf_counter() - started)
        print(block, flush=True)
        if not args.no_write:
            write(section.slug, block)


def chosen_sections(slugs: Sequence[str] | None) -> list[Section]:
    if slugs is None:
        return list(SECTIONS)
    known = {section.slug: section for section in SECTIONS}
    unknown = [slug for slug in slugs if slug not in known]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}: the sections are {sorted(known)}")
    return [known[slug] for slug in slugs]


def render(section: Section, body: str, seconds: float) -> str:
    measured = (
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {platform.machine()}, Python "
        f"{platform.python_version()}, {os.cpu_count() or 1} cores "
        f"(`make bench`, section `{section.slug}`; {seconds:.0f} s to run)."
    )
    heading = f"## {section.title}\n\n" if section.title else ""
    return f"{heading}{measured}\n\n{body}"


def markers(slug: str) -> tuple[str, str]:
    return f"<!-- bench:{slug}:start -->", f"<!-- bench:{slug}:end -->"


def write(slug: str, block: str, docs: Path = DOCS) -> Path:
    """Put ``block`` between the section's markers in the one page that holds them, or at the
    end of the benchmarks page. Markers in two pages are an error: which one would be current?"""
    start, end = markers(slug)
    holders = [p for p in sorted(docs.rglob("*.md")) if start in p.read_text()]
    if len(holders) > 1:
        raise SystemExit(f"the markers of {slug!r} are in {len(holders)} pages: {holders}")
    target = holders[0] if holders else docs / PAGE.name
    text = target.read_text()
    if start in text:
        before, rest = text.split(start, 1)
        if end not in rest:
            raise SystemExit(f"{target}: {start} without {end}")
        after = rest.split(end, 1)[1]
        text = f"{before}{start}\n{block}\n{end}{after}"
    else:
        text = f"{text.rstrip()}\n\n{start}\n{block}\n{end}\n"
    target.write_text(text)
    return target


if __name__ == "__main__":
    main()

"""``make demo`` run once for this package's modules, each reading its part's facts and lines.

The whole demo plays every part (jobs, observers, pooled observers, tasks, effects) on one
deployed stack; a module that deployed and replayed its own part would pay for it twice.
``make test``'s workers take this package whole (``ONE_WORKER_PACKAGES`` in tests/conftest.py),
so the run is once per ``make test``, not once per worker.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vigil_tools.demo import main as demo
from vigil_tools.emulator.template import Synthesized
from vigil_tools.project import find_project


@dataclass(frozen=True)
class DemoRun:
    facts: dict[str, Any]
    """What ``simulate`` read back, a key per part (``observers``, ``pooled``, ...)."""
    output: str
    """Everything the demo printed."""
    logs: Path
    """The functions', containers' and hosts' logs."""

    def section(self, title: str) -> str:
        """The printed part headed ``=== title ===``, up to the next part's heading."""
        heading = f"=== {title} ==="
        assert heading in self.output, f"the demo printed no {heading!r}"
        after = self.output.split(heading, 1)[1]
        return heading + after.split("\n=== ", 1)[0]

    def part(self, key: str, title: str) -> dict[str, Any]:
        """What a part's module reads: its facts, its printed section, the logs."""
        return {"facts": self.facts[key], "output": self.section(title), "logs": self.logs}


@pytest.fixture(scope="package")
def demo_run(synthesized: Synthesized) -> DemoRun:
    project = find_project()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # the session's synth (`make demo` synthesizes its own)
        facts = demo.simulate(project, cdk_out=synthesized.outdir)
    return DemoRun(facts, printed.getvalue(), project.root / demo.LOG_DIR)

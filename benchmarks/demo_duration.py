"""How long ``make demo`` takes after set-up, section by section (the guide's budget: two minutes).

The demo runs as users run it, in a fresh interpreter; each section's time is measured from its
``=== title ===`` line to the next one, so a slow part shows by name.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 120


def run() -> str:
    began = time.perf_counter()
    marks: list[tuple[str, float]] = [("start-up, synth, deploy, scheduled jobs", began)]
    with subprocess.Popen(
        [sys.executable, "-m", "vigil_tools.demo", "--project", str(ROOT)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as demo:
        assert demo.stdout is not None
        output = []
        for line in demo.stdout:
            output.append(line)
            if line.startswith("=== ") and line.rstrip().endswith(" ==="):
                marks.append((line.strip("= \n"), time.perf_counter()))
        code = demo.wait()
    ended = time.perf_counter()
    if code != 0:
        raise RuntimeError(f"make demo failed (exit {code}):\n{''.join(output[-40:])}")
    rows = [
        f"| {name} | {(marks[i + 1][1] if i + 1 < len(marks) else ended) - at:.1f} |"
        for i, (name, at) in enumerate(marks)
    ]
    total = ended - began
    return "\n".join(
        [
            "| section of `make demo` | seconds |",
            "|---|---:|",
            *rows,
            f"| **total** | **{total:.1f}** (budget {BUDGET_S}) |",
        ]
    )


if __name__ == "__main__":
    print(run())

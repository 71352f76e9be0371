"""Cold-start proxy: how long importing a job's Lambda module takes, beside ``import boto3``.

Each figure is the median of fresh interpreter runs (``python -X importtime`` would count the
interpreter's own start-up noise differently; timing the import statement is what Lambda's init
phase pays for the module).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 15
TIMER = "import time; t = time.perf_counter(); {statement}; print((time.perf_counter() - t) * 1000)"


def _median_ms(statement: str, tracing: bool) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'functions'}",
        "PYTHONDONTWRITEBYTECODE": "0",
        "POWERTOOLS_TRACE_DISABLED": "false" if tracing else "true",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    samples = []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", TIMER.format(statement=statement)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return statistics.median(samples)


def run() -> str:
    boto3_ms = _median_ms("import boto3", tracing=False)
    job_off = _median_ms("import boto3; import jobs.cleanup", tracing=False)
    job_on = _median_ms("import boto3; import jobs.cleanup", tracing=True)
    return "\n".join(
        [
            f"| Import (median of {RUNS} fresh interpreters) | ms | above `import boto3` |",
            "|---|---:|---:|",
            f"| `import boto3` | {boto3_ms:.0f} | - |",
            f"| job module, tracing off | {job_off:.0f} | +{job_off - boto3_ms:.0f} |",
            f"| job module, tracing on | {job_on:.0f} | +{job_on - boto3_ms:.0f} |",
            "\nThe target is at most +60 ms with tracing off. With tracing on, Powertools' Tracer "
            "loads the X-Ray SDK when the handler is decorated: that is the difference. Nothing "
            "imports Powertools' parser or pydantic on a job's path.",
        ]
    )


if __name__ == "__main__":
    print(run())

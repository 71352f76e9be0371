"""The local stack's memory over time: ``vigil local up --speed 60`` with 50 observers.

Starts ``vigil local up`` in a subprocess (the template synthesized once beforehand), creates the
observers through the ``vigil`` CLI (pooled tickers: a few host processes, so the load is the
stack's own writes, not 50 interpreters), then samples the RSS of the ``vigil local up`` process
(moto lives there) every ``SAMPLE_S`` seconds. Growth is the least-squares slope of RSS over the
samples after a warm-up, in MB per minute; target at most 2. ``--as-is`` runs the same with moto
left as it is (``VIGIL_MOTO_AS_IS=1``: no ``vigil_tools.emulator.moto_memory``).

    python -m benchmarks.local_memory --minutes 60 [--observers 50] [--as-is]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from vigil_tools.cli import main as vigil
from vigil_tools.emulator.moto_memory import AS_IS
from vigil_tools.local.up import READY

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_S = 30.0
WARM_UP_S = 120.0
STARTUP_S = 600.0
SPEED = 60
OBSERVERS = 50
KIND = "pooled-ticker"


def measure(
    minutes: float, observers: int = OBSERVERS, *, as_is: bool = False
) -> list[tuple[float, float]]:
    """(seconds since the observers were created, RSS in MB) samples of ``vigil local up``."""
    from vigil_tools.emulator.template import synthesize

    synth = synthesize()
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}"}
    env.pop(AS_IS, None)
    if as_is:
        env[AS_IS] = "1"
    work = Path(tempfile.mkdtemp(prefix="vigil-local-memory-"))
    command = [
        sys.executable, "-m", "vigil_tools.cli", "local", "up", "--port", str(port),
        "--speed", str(SPEED), "--quiet", "--cdk-out", str(synth.outdir), "--project", str(ROOT),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    threading.Thread(target=_read, args=(process, lines), daemon=True).start()
    try:
        _wait(lambda: READY in lines or process.poll() is not None, STARTUP_S)
        if READY not in lines:
            raise RuntimeError(f"vigil local up did not start: {lines[-5:]}")
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in lines
            if line.startswith("export ")
        )
        os.environ.update(exports)
        for n in range(observers):
            _create(f"m{n}")
        samples: list[tuple[float, float]] = []
        began = time.monotonic()
        while time.monotonic() - began < minutes * 60 and process.poll() is None:
            samples.append((time.monotonic() - began, _rss_mb(process.pid)))
            print(f"{samples[-1][0]:6.0f} s {samples[-1][1]:7.1f} MB", file=sys.stderr, flush=True)
            time.sleep(SAMPLE_S)
        return samples
    finally:
        process.send_signal(2)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _create(name: str, tries: int = 6) -> None:
    """One observer through the CLI; a busy machine can time the API out, so it is asked again
    (a create that landed answers "exists" then, which is as good)."""
    argv = ["--json", "observers", "create", name, "--kind", KIND,
            "--config", json.dumps({"interval_seconds": 5})]  # fmt: skip
    for _ in range(tries):
        out, err = io.StringIO(), io.StringIO()
        if vigil(argv, stdout=out, stderr=err) == 0 or "exists" in err.getvalue():
            return
        time.sleep(2)
    raise RuntimeError(f"observers create {name} failed: {err.getvalue()}")


def slope_mb_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares growth after the warm-up, in MB per minute."""
    points = [(t / 60, mb) for t, mb in samples if t >= WARM_UP_S] or [
        (t / 60, mb) for t, mb in samples
    ]
    if len(points) < 2:
        return float("nan")
    mean_t = sum(t for t, _ in points) / len(points)
    mean_m = sum(m for _, m in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (m - mean_m) for t, m in points) / var if var else float("nan")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _read(process: subprocess.Popen[str], lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))


def _wait(condition: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():  # type: ignore[operator]
        time.sleep(0.5)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(minutes: float = 60) -> str:
    """The benchmarks page's rows: growth with the workaround and with moto as it is."""
    rows = ["| `vigil local up --speed 60`, 50 observers | start MB | end MB | MB/min (target <= 2) |",
            "|---|---:|---:|---:|"]  # fmt: skip
    for label, as_is in (("moto kept flat (moto_memory)", False), ("moto as it is", True)):
        samples = measure(minutes, as_is=as_is)
        rows.append(
            f"| {label}, {minutes:g} min | {samples[0][1]:.0f} | {samples[-1][1]:.0f} | "
            f"{slope_mb_per_min(samples):.2f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.local_memory", description=__doc__)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--observers", type=int, default=OBSERVERS)
    parser.add_argument("--as-is", action="store_true", help="moto without the workaround")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.observers < 0:
        parser.error("--minutes must be positive and --observers not negative")
    samples = measure(args.minutes, args.observers, as_is=args.as_is)
    print(json.dumps({"as_is": args.as_is, "samples": samples,
                      "mb_per_min": slope_mb_per_min(samples)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

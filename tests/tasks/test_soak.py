"""The tasks chaos soak, short (``benchmarks/tasks_soak.py``; the 10,000-task runs are in
docs/benchmarks.md): every fault on, the targets held; the guard broken, the counters catch it.
Seeded and on a simulated clock: the same counts on every run."""

from __future__ import annotations

import pytest

from benchmarks.tasks_soak import main, soak

pytestmark = pytest.mark.slow


def test_a_short_soak_with_every_fault_meets_every_target() -> None:
    report = soak(tasks=40, seed=7)  # ~3 s of CPU
    assert report.tasks == 40 and report.redriven > 0 and report.outcomes["SUCCEEDED"] > 30
    assert report.held, "\n".join([*report.lines(), str(report.examples)])


def test_the_soak_catches_a_guard_whose_claim_takes_anything() -> None:
    report = soak(tasks=40, seed=1, broken_guard=True)  # ~3 s of CPU
    assert report.caught, "\n".join(report.lines())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--tasks", "0"], "--tasks must be positive, not 0"),
        (["--tasks", "many"], "--tasks must be a whole number, not 'many'"),
        (["--faults", "kill,meteor"], "unknown fault 'meteor'"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2 and message in capsys.readouterr().err

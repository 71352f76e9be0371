"""The flows chaos soak, short (``benchmarks/flows_soak.py``; the 100-flow runs are in
docs/benchmarks.md): every fault on, every target held; the journal broken, the counters catch
it. Seeded and on a simulated clock: the same counts on every run."""

from __future__ import annotations

import pytest

from benchmarks.flows_soak import main, soak

pytestmark = pytest.mark.slow


def test_a_short_flows_soak_with_every_fault_meets_every_target() -> None:
    report = soak(flows=6, seed=24)  # ~5 s of CPU; fates ok, flaky, poison, abort, silent
    assert report.flows == 6 and report.outcomes["SUCCEEDED"] >= 3
    assert report.outcomes["COMPENSATED"] + report.outcomes["FAILED"] == 2
    assert sum(report.repeats.values()) > 0, "no fault made a step or a child run again"
    assert report.held, "\n".join([*report.lines(), str(report.examples)])


def test_the_flows_soak_catches_a_journal_that_forgets_finished_steps() -> None:
    report = soak(flows=3, seed=3, broken_journal=True)  # ~2.5 s of CPU
    assert report.caught, "\n".join(report.lines())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--flows", "0"], "--flows must be positive, not 0"),
        (["--faults", "kill,cancel"], "unknown fault 'cancel'"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2 and message in capsys.readouterr().err

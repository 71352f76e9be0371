"""The chaos soak (``benchmarks/chaos_soak.py``) in the suite: 300 ticks under every fault, and
the deliberately broken guard it must catch."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.chaos_soak import FAULTS, HANG_CAUSE, Report, main, soak
from vigil_tools.emulator.template import Synthesized

TICKS = 300


@pytest.fixture(scope="module")
def report(synthesized: Synthesized) -> Report:
    return soak(ticks=TICKS, seed=1, synth=synthesized)


def test_no_tick_is_lost_and_the_records_equal_the_ledger(report: Report) -> None:
    assert report.ticks == TICKS
    assert report.lost == 0, report.examples
    assert report.mismatches == 0, report.examples
    # the faults happened: hung runs were taken over and their late effects refused (by the
    # journal's fence, or the ledger's token check); a hung run that did its effect before the
    # takeover is not refused, its successor skips the effect
    assert report.second_bodies[HANG_CAUSE] > 0
    assert 0 < report.late_writes_refused <= report.second_bodies[HANG_CAUSE]
    assert report.dead_lettered > 0 or report.invocations > TICKS


def test_no_finished_body_runs_again_and_no_effect_is_accepted_twice(report: Report) -> None:
    others = {cause: n for cause, n in report.second_bodies.items() if cause != HANG_CAUSE}
    assert others == {}, report.examples
    assert report.effects_twice == 0, report.examples


def test_a_guard_without_the_claims_condition_is_caught(synthesized: Synthesized) -> None:
    broken = soak(ticks=60, seed=3, faults=("duplicate",), broken_guard=True, synth=synthesized)
    assert broken.caught
    assert broken.effects_twice > 0
    assert sum(broken.second_bodies.values()) >= broken.effects_twice


def test_a_long_soak_says_how_far_it_got_as_it_goes(
    synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("benchmarks.chaos_soak.PROGRESS_EVERY", 10)
    lines: list[str] = []
    soak(ticks=30, seed=4, faults=("duplicate",), synth=synthesized, progress=lines.append)
    assert [line.split(" after ")[0] for line in lines] == [
        "tick 10 of 30",
        "tick 20 of 30",
        "tick 30 of 30",
    ]
    assert all("ticks/s" in line and "min to go" in line for line in lines)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--ticks", "-5"], "--ticks must be positive, not -5"),
        (["--ticks", "0"], "--ticks must be positive, not 0"),
        (["--ticks", "many"], "--ticks must be a whole number, not 'many'"),
        (["--faults", "hang,meteor"], "unknown fault 'meteor'; known: " + ", ".join(FAULTS)),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr("benchmarks.chaos_soak.soak", lambda **kwargs: ran.append(kwargs))
    with pytest.raises(SystemExit) as exit_:
        main(arguments)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert ran == []

"""The observers part of ``make demo``, on the synthesized stack deployed on the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.demo.conftest import DemoRun


@pytest.fixture(scope="module")
def story(demo_run: DemoRun) -> dict[str, Any]:
    """The observers part of the package's one run of the whole demo (conftest.py)."""
    return demo_run.part("observers", "Observers")


def test_the_cli_lists_kinds_and_creates_both_observers(story: dict[str, Any]) -> None:
    facts = story["facts"]
    assert facts["kinds"] == ["pooled-ticker", "ticker"]  # app.py declares both
    assert facts["created"] == {"btc-watch": "PENDING", "eth-watch": "PENDING"}


def test_a_create_retried_with_its_key_replays_the_first_answer_and_writes_nothing(
    story: dict[str, Any],
) -> None:
    facts = story["facts"]
    assert facts["replayed"] is True
    assert facts["replay_wrote_nothing"] is True
    assert facts["duplicate_without_key"]["exit_code"] == 1
    assert "observer_exists, HTTP 409" in facts["duplicate_without_key"]["error"]


def test_an_unknown_kind_is_refused_with_422_and_writes_nothing(story: dict[str, Any]) -> None:
    rejected = story["facts"]["rejected"]
    assert rejected["exit_code"] == 1 and rejected["http_status"] == 422
    assert "kind 'websocket' is not one of ['pooled-ticker', 'ticker']" in rejected["error"]
    assert rejected["nothing_written"] is True
    assert rejected["sol_watch_exists"] is False


def test_the_stream_pass_starts_one_task_per_observer(story: dict[str, Any]) -> None:
    facts = story["facts"]
    assert facts["first_pass"] == [{"pass": "stream", "observers": 2}]
    assert facts["tasks_after_create"] == 2
    assert facts["counts_before_crash"] == {"btc-watch": 4, "eth-watch": 4}


def test_a_crash_restarts_with_the_next_generation_from_the_checkpoint(
    story: dict[str, Any],
) -> None:
    restart = story["facts"]["restart"]
    assert (restart["old_generation"], restart["new_generation"]) == (1, 2)
    assert restart["restarts"] == 1
    assert restart["resumed_count"] == restart["count_at_crash"] + 1
    assert restart["last_exit"]["exit_code"] == 1
    assert restart["last_exit"]["stop_code"] == "EssentialContainerExited"


def test_the_replaced_generation_is_fenced_and_writes_nothing(story: dict[str, Any]) -> None:
    facts = story["facts"]
    fencing = facts["fencing"]
    assert fencing["generation"] == 1 and fencing["exit_code"] == 3 and not fencing["alive"]
    assert fencing["refused"] in ("heartbeat", "checkpoint")
    # Three ticks of generation 2 after its first: generation 1's attempt left no trace.
    assert fencing["count_after"] == facts["restart"]["resumed_count"] + 3


def test_a_stop_through_the_cli_stops_the_task_and_marks_the_observer_stopped(
    story: dict[str, Any],
) -> None:
    stop = story["facts"]["stop"]
    assert stop == {
        "cli_exit_code": 0,
        "container_exit_code": 0,
        "task_status": "STOPPED",
        "status": "STOPPED",
    }


def test_the_final_table_is_read_back_from_the_registry_and_ecs(story: dict[str, Any]) -> None:
    facts = story["facts"]
    btc, eth = facts["observers"]["btc-watch"], facts["observers"]["eth-watch"]
    assert (btc["status"], btc["desired"], btc["generation"], btc["restarts"]) == (
        "STOPPED",
        "STOPPED",
        1,
        0,
    )
    assert btc["task_status"] == "STOPPED"
    assert (eth["status"], eth["generation"], eth["restarts"], eth["task_status"]) == (
        "RUNNING",
        2,
        1,
        "RUNNING",
    )
    assert eth["count"] == facts["fencing"]["count_after"] + 3
    assert facts["containers"] == {"btc-watch/1": 0, "eth-watch/1": 3, "eth-watch/2": None}
    assert facts["tasks_started"] == [("btc-watch", 1), ("eth-watch", 1), ("eth-watch", 2)]
    # (the stopped btc-watch is not read: the fleet index holds every observer but the STOPPED)
    assert facts["resync"] == {"pass": "resync", "observers": 1, "described": 0}


def test_the_story_reads_well(story: dict[str, Any]) -> None:
    output = story["output"]
    assert "=== Observers ===" in output
    assert "the first answer replayed, nothing written" in output
    assert "is refused (fenced): it stops, exit code 3" in output
    assert "MarkStopped: STOPPED" in output
    logs: Path = story["logs"]
    assert (logs / "container-eth-watch-gen2.log").read_text().count('"message":"tick"') >= 4

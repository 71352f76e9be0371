"""The pooled part of ``make demo``: the real host process on the deployed stack, on the
simulated clock (no sleeps): packed hosts, a failover resumed from checkpoints, a zombie fenced."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.demo.conftest import DemoRun

HEARTBEAT = 30
"""The demo's host heartbeat interval (seconds)."""


@pytest.fixture(scope="module")
def story(demo_run: DemoRun) -> dict[str, Any]:
    """The pooled part of the package's one run of the whole demo (conftest.py)."""
    return demo_run.part("pooled", "Pooled observers")


def test_observers_are_packed_on_hosts(story: dict[str, Any]) -> None:
    packed = story["facts"]["packed"]
    assert packed["running"] == [f"feed-{i:02d}" for i in range(1, 11)]
    assert packed["tasks"] == 2  # ten observers, two Fargate tasks
    assert packed["hosts"] == {
        "host A": [f"feed-{i:02d}" for i in range(1, 7)],
        "host B": [f"feed-{i:02d}" for i in range(7, 11)],  # the least-loaded host
    }


def test_a_killed_hosts_observers_run_again_elsewhere_from_their_checkpoints(
    story: dict[str, Any],
) -> None:
    failover = story["facts"]["failover"]
    assert failover["host"] == "host B"
    assert failover["seconds"] is not None
    assert failover["heartbeat_intervals"] <= 2  # the target, with the headroom held
    assert set(failover["observers"]) == {f"feed-{i:02d}" for i in range(7, 11)}
    for moved in failover["observers"].values():
        assert moved["generation"] == (1, 2)
        assert moved["host"] == ("host B", "host A")
        assert moved["status"] == "RUNNING"
        before, after = moved["count"]
        assert before >= 1 and after == before + 1  # resumed, not started over


def test_a_zombie_host_is_fenced_at_its_next_heartbeat(story: dict[str, Any]) -> None:
    zombie = story["facts"]["zombie"]
    assert zombie["host"] == "host A" and zombie["status"] == "LOST"
    assert zombie["exit_code"] == 3
    assert zombie["fenced"] is not None and zombie["fenced"].endswith("its status is LOST")
    assert 0 < zombie["fenced_after_seconds"] <= HEARTBEAT  # within one heartbeat interval
    assert set(zombie["children_exit_codes"].values()) == {3}
    assert len(zombie["children_exit_codes"]) == 10
    for name, moved in zombie["observers"].items():
        old, new = moved["generation"]
        assert new == old + 1 == moved["placed_generation"], name
        assert moved["host"][0] == "host A" and moved["host"][1] not in ("host A", "host B")
        assert moved["status"] == "RUNNING"
        before, after = moved["count"]
        assert after > before  # the new generation continued the count


def test_the_final_tables_read_back_hosts_and_observers(story: dict[str, Any]) -> None:
    facts = story["facts"]
    assert facts["hosts"]["host A"]["status"] == "LOST"
    assert facts["hosts"]["host B"]["status"] == "LOST"
    live = {k: h for k, h in facts["hosts"].items() if h["status"] in ("STARTING", "RUNNING")}
    placed = {name for host in live.values() for name in host["observers"]}
    assert placed == set(facts["observers"])
    assert {o["status"] for o in facts["observers"].values()} == {"RUNNING"}
    assert all(o["host"] in live for o in facts["observers"].values())


def test_the_story_reads_well(story: dict[str, Any]) -> None:
    for phrase in (
        "=== Pooled observers ===",
        "observers (generation)",
        "resumed from its checkpoint: count",
        "the zombie's next heartbeat is refused",
    ):
        assert phrase in story["output"]
    host_logs = list(story["logs"].glob("host-*.log"))
    assert len(host_logs) == len(story["facts"]["hosts"])
    assert any('"observer":"feed-01"' in log.read_text() for log in host_logs)


def test_a_deploy_rolls_every_observer_onto_the_new_revision_and_retires_the_old_hosts(
    story: dict[str, Any],
) -> None:
    rollout = story["facts"]["rollout"]
    assert rollout["seconds"] is not None and rollout["retired_seconds"] is not None
    for name, moved in rollout["observers"].items():
        assert moved["status"] == "RUNNING", name
        assert moved["revision"] == rollout["revision"], name
        before, after = moved["generation"]
        assert after > before, name  # a hand-over: a new generation claimed it
        was, now = moved["count"]
        assert now >= was, name  # resumed from the checkpoint, never from zero
    old = [h for h in story["facts"]["hosts"].values() if h["revision"] != rollout["revision"]]
    assert old and {h["status"] for h in old} <= {"STOPPED", "LOST"}

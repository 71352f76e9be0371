"""The ECS adapter's pure parts: identifiers within ECS's limits, and task states read from ECS."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vigil.observers.ecs_tasks import (
    MAX_CLIENT_TOKEN,
    MAX_STARTED_BY,
    client_token,
    started_by,
    task_state,
)

names = st.from_regex(r"[a-z0-9-]{1,63}", fullmatch=True)


@given(names, st.text(min_size=1, max_size=30), st.integers(min_value=0, max_value=10**12))
def test_identifiers_fit_ecs_limits_and_are_deterministic(
    name: str, incarnation: str, generation: int
) -> None:
    token = client_token(name, incarnation, generation)
    assert len(token) <= MAX_CLIENT_TOKEN and token == client_token(name, incarnation, generation)
    assert token != client_token(name, incarnation, generation + 1)
    assert token != client_token(name, incarnation + "x", generation)
    assert len(started_by(name)) <= MAX_STARTED_BY and started_by(name) == started_by(name)


def test_started_by_is_the_name_when_it_fits() -> None:
    assert started_by("btc-usd") == "btc-usd"
    long = "a" * 40
    assert started_by(long).startswith("a" * 27) and started_by(long) != started_by("a" * 41)


def test_a_stopped_event_reads_the_failing_container_and_the_marks() -> None:
    state = task_state(
        {
            "taskArn": "arn:task/1",
            "lastStatus": "STOPPED",
            "version": "7",
            "stopCode": "EssentialContainerExited",
            "stoppedAt": "2026-11-22T12:00:00.000Z",
            "containers": [{"exitCode": 0}, {"exitCode": 137}],
            "overrides": {
                "containerOverrides": [
                    {
                        "environment": [
                            {"name": "VIGIL_OBSERVER_NAME", "value": "btc"},
                            {"name": "VIGIL_OBSERVER_GENERATION", "value": "4"},
                        ]
                    }
                ]
            },
        }
    )
    assert (state.observer, state.generation, state.version, state.exit_code) == ("btc", 4, 7, 137)
    assert state.stopped and state.stopped_at is not None


def test_tags_mark_a_described_task_without_overrides() -> None:
    state = task_state(
        {
            "taskArn": "arn:task/2",
            "lastStatus": "RUNNING",
            "tags": [
                {"key": "vigil:observer", "value": "eth"},
                {"key": "vigil:generation", "value": "2"},
            ],
        }
    )
    assert (state.observer, state.generation, state.stopped) == ("eth", 2, False)

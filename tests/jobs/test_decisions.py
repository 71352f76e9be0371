"""Properties of the conflict decision: pure, so hypothesis can explore every state it may see."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vigil.clock import epoch_ms
from vigil.jobs.decisions import ClaimTerms, Verdict, resolve_conflict
from vigil.jobs.model import FINAL_STATUSES, RERUNNABLE_STATUSES, Overlap, RunStatus

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TOKEN = int(NOW.timestamp() * 1_000_000)
ME = "this-invocation"

offsets = st.integers(min_value=-600, max_value=600)
ticks = st.one_of(
    st.none(),
    st.builds(
        lambda status, attempts, offset, holder: {
            "status": status.value,
            "attempts": attempts,
            "fencing_token": 7,
            "lease_until_ms": epoch_ms(NOW + timedelta(seconds=offset)),
            "lease_holder": holder,
        },
        st.sampled_from(list(RunStatus)),
        st.integers(min_value=0, max_value=5),
        offsets,
        st.sampled_from([ME, "another-invocation"]),
    ),
)
heads = st.one_of(
    st.none(),
    st.builds(
        lambda fence_delta, offset, holds: {
            "fence": TOKEN + fence_delta,
            **(
                {"lease_until_ms": epoch_ms(NOW + timedelta(seconds=offset)), "lease_tick": "T0"}
                if holds
                else {}
            ),
        },
        st.integers(min_value=-1000, max_value=1000),
        offsets,
        st.booleans(),
    ),
)


def decide(
    tick: Any,
    head: Any,
    overlap: Overlap,
    tick_refused: bool,
    head_refused: bool,
    redriven: bool = False,
) -> Any:
    return resolve_conflict(
        terms=ClaimTerms(),
        token=TOKEN,
        overlap=overlap,
        holder=ME,
        tick_refused=tick_refused,
        tick_seen=tick,
        head_refused=head_refused,
        head_seen=head,
        now=NOW,
        redriven=redriven,
    )


@given(ticks, heads, st.sampled_from(list(Overlap)), st.booleans())
def test_a_final_or_live_tick_never_runs_again(
    tick: Any, head: Any, overlap: Overlap, head_refused: bool
) -> None:
    decision = decide(tick, head, overlap, True, head_refused)
    if tick is None:
        assert decision.verdict is not Verdict.DUPLICATE
        return
    live = tick["lease_until_ms"] >= epoch_ms(NOW)
    final = RunStatus(tick["status"]) in FINAL_STATUSES
    running_live = tick["status"] == RunStatus.RUNNING and live
    mine = tick["lease_holder"] == ME
    # Another invocation's live run is a duplicate; this invocation's own (a Lambda retry after a
    # crash) is BUSY: it fails so Lambda retries later. Neither runs the body.
    assert (decision.verdict is Verdict.DUPLICATE) == (final or (running_live and not mine))
    assert (decision.verdict is Verdict.BUSY) == (not final and running_live and mine)


@given(ticks, heads, st.booleans())
def test_allow_never_skips(tick: Any, head: Any, tick_refused: bool) -> None:
    assert decide(tick, head, Overlap.ALLOW, tick_refused, True).verdict is not Verdict.SKIP


@given(heads)
def test_a_retry_always_proposes_a_token_above_the_fence_it_saw(head: Any) -> None:
    decision = decide(None, head, Overlap.ALLOW, False, True)
    assert decision.verdict is Verdict.RETRY
    fence = head["fence"] if head else 0
    assert max(TOKEN, decision.terms.token_floor + 1) > fence


@given(ticks)
def test_a_retry_expects_the_attempt_count_it_saw(tick: Any) -> None:
    decision = decide(tick, None, Overlap.SKIP, True, False)
    if decision.verdict is Verdict.RETRY:
        assert decision.terms.expected_attempts == (tick["attempts"] if tick else 0)


def test_a_live_lease_of_another_tick_under_skip_is_a_skip() -> None:
    head = {"fence": TOKEN - 5, "lease_until_ms": epoch_ms(NOW) + 1000, "lease_tick": "T0"}
    decision = decide(None, head, Overlap.SKIP, False, True)
    assert decision.verdict is Verdict.SKIP
    assert "T0" in decision.reason


@given(ticks, heads, st.sampled_from(list(Overlap)), st.booleans(), st.booleans())
def test_a_redrive_is_never_skipped(
    tick: Any, head: Any, overlap: Overlap, tick_refused: bool, head_refused: bool
) -> None:
    """A redriven tick recorded SKIPPED is final: the operator's redrive would be lost."""
    decision = decide(tick, head, overlap, tick_refused, head_refused, redriven=True)
    assert decision.verdict is not Verdict.SKIP


def test_a_redrive_meeting_another_ticks_live_lease_under_skip_is_busy() -> None:
    head = {"fence": TOKEN - 5, "lease_until_ms": epoch_ms(NOW) + 1000, "lease_tick": "T0"}
    decision = decide(None, head, Overlap.SKIP, False, True, redriven=True)
    assert decision.verdict is Verdict.BUSY
    assert "T0" in decision.reason


@given(st.sampled_from(sorted(FINAL_STATUSES)), heads, st.booleans())
def test_a_rerun_of_a_tick_the_claim_may_not_take_over_is_a_duplicate(
    status: RunStatus, head: Any, head_refused: bool
) -> None:
    """An operator's rerun (``--at``) of a final tick the claim's condition refuses (SUCCEEDED,
    UNCERTAIN, FENCED) must end DUPLICATE at once: RETRY would claim, be refused again, and end
    in ClaimContention after every attempt."""
    tick = {"status": status.value, "attempts": 1, "fencing_token": 7, "lease_until_ms": 0}
    decision = resolve_conflict(
        terms=ClaimTerms(),
        token=TOKEN,
        overlap=Overlap.ALLOW,
        holder=ME,
        tick_refused=True,
        tick_seen=tick,
        head_refused=head_refused,
        head_seen=head,
        now=NOW,
        rerun=True,
    )
    assert (decision.verdict is Verdict.DUPLICATE) == (status not in RERUNNABLE_STATUSES)

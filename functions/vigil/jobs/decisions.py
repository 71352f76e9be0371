"""What to do when a claim's conditional write is refused: a pure function of what it saw.

The claim is one transaction of two conditional updates (see ``store.py``): the tick's record
(absent, or re-claimable: FAILED, or RUNNING with an expired lease) and the job's head (fence below
the proposed token and, under the ``skip`` policy, no live lease). When DynamoDB cancels it, each
refused update returns the item it saw, and this module decides from those alone, so no extra read
is ever needed:

* the tick is final (SUCCEEDED, SKIPPED, MISSED, PAUSED; for an operator's rerun only SUCCEEDED)
  or running under another invocation's live lease
  -> DUPLICATE;
* it runs under a live lease taken by this same invocation: Lambda retries an asynchronous
  invocation under its request id, so the earlier attempt crashed (or this is the async queue's
  own duplicate) -> BUSY: fail, so Lambda retries later, or dead-letters it, instead of losing it;
* the job is paused (its head's ``paused_until_ms`` is ahead of the claim's clock) -> PAUSED;
* another tick holds the job's live lease and the policy is ``skip`` -> SKIP, unless the delivery
  is an operator's redrive -> BUSY: ``vigil jobs redrive`` hands back every dead-lettered event
  at once, and a redriven tick recorded SKIPPED (final) would be lost for good; failing lets
  Lambda retry it once the other run has finished, or dead-letter it again;
* otherwise the state moved (a failed or expired run to take over, a fence ahead of our clock)
  -> RETRY with the expectations corrected from what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from vigil.clock import epoch_ms
from vigil.dynamo import Item
from vigil.jobs.model import FINAL_STATUSES, STANDING_STATUSES, Overlap, RunStatus
from vigil.leases import fence_of, lease_is_live


class Verdict(StrEnum):
    RETRY = "RETRY"
    DUPLICATE = "DUPLICATE"
    SKIP = "SKIP"
    BUSY = "BUSY"
    PAUSED = "PAUSED"


def pause_is_live(head: Item | None, now: datetime) -> bool:
    """The head carries a pause that has not ended yet (the claim's condition, read back)."""
    return bool(head and int(head.get("paused_until_ms", 0)) > epoch_ms(now))


@dataclass(frozen=True)
class ClaimTerms:
    """What a claim proposes: the attempt count it expects on the record, and a token floor."""

    expected_attempts: int = 0
    token_floor: int = 0
    first_attempt: int = 1
    """The tick's attempt at which this delivery's request began (1 for a schedule's delivery; an
    operator's rerun of a tick tried 3 times begins at 4), so Lambda's retries left are counted
    per request."""


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    terms: ClaimTerms
    reason: str


def resolve_conflict(
    *,
    terms: ClaimTerms,
    token: int,
    overlap: Overlap,
    holder: str,
    tick_refused: bool,
    tick_seen: Item | None,
    head_refused: bool,
    head_seen: Item | None,
    now: datetime,
    rerun: bool = False,
    request_id: str | None = None,
    redriven: bool = False,
) -> Decision:
    new_terms = terms
    if tick_refused:
        if tick_seen is None:
            new_terms = replace(new_terms, expected_attempts=0)
        else:
            status = RunStatus(tick_seen["status"])
            # A rerun may take over only what its claim's condition lets it (a retry of the
            # rest would be refused again, to ClaimContention): the rest is a duplicate.
            if status in STANDING_STATUSES or (status in FINAL_STATUSES and not rerun):
                return Decision(Verdict.DUPLICATE, terms, f"tick already {status.value}")
            if status is RunStatus.RUNNING and lease_is_live(tick_seen, now):
                if tick_seen.get("lease_holder") == holder:
                    return Decision(
                        Verdict.BUSY,
                        terms,
                        f"an earlier attempt of this invocation holds the tick until "
                        f"{tick_seen.get('lease_until')}",
                    )
                return Decision(
                    Verdict.DUPLICATE,
                    terms,
                    f"tick is running under token {tick_seen.get('fencing_token')}",
                )
            seen = int(tick_seen.get("attempts", 0))
            same_request = tick_seen.get("request_id") == request_id
            first = int(tick_seen.get("first_attempt", 1)) if same_request else seen + 1
            new_terms = replace(new_terms, expected_attempts=seen, first_attempt=first)
    if head_refused and pause_is_live(head_seen, now):
        assert head_seen is not None
        return Decision(
            Verdict.PAUSED,
            new_terms,
            f"job paused by {head_seen.get('paused_by')}: {head_seen.get('pause_reason')}",
        )
    if head_refused:
        fence = fence_of(head_seen)
        if fence >= token:
            new_terms = replace(new_terms, token_floor=fence)
        elif overlap is Overlap.SKIP and lease_is_live(head_seen, now):
            assert head_seen is not None
            overlaps = (
                f"overlaps the run of tick {head_seen.get('lease_tick')} "
                f"(lease until {head_seen.get('lease_until')})"
            )
            if redriven:
                return Decision(Verdict.BUSY, new_terms, f"a redrive {overlaps}: not skipped")
            return Decision(Verdict.SKIP, new_terms, overlaps)
    return Decision(Verdict.RETRY, new_terms, "state moved; claiming again with what was seen")


class DurationFlag(StrEnum):
    TOO_LONG = "TOO_LONG"
    TOO_SHORT = "TOO_SHORT"


def duration_flag(
    duration: timedelta,
    *,
    succeeded: bool,
    max_duration: timedelta | None,
    min_duration: timedelta | None,
) -> DurationFlag | None:
    """A run longer than ``max_duration`` (whatever its outcome) or a success faster than
    ``min_duration`` (it probably did nothing) is flagged; unset limits flag nothing."""
    if max_duration is not None and duration > max_duration:
        return DurationFlag.TOO_LONG
    if succeeded and min_duration is not None and duration < min_duration:
        return DurationFlag.TOO_SHORT
    return None

"""The key pattern of a kind's task role against the keys the runtime really makes.

A pooled kind's task role reaches the hosts table only for keys matching ``host_id_pattern(kind)``
(``dynamodb:LeadingKeys``; the synthesized grants are checked in ``test_pooled_kinds``). No IAM
policy simulator runs here, so the pattern is matched with IAM's ``StringLike`` rules against host
ids the reconciler makes, for kinds whose names are prefixes of each other. Cost: milliseconds.
"""

from __future__ import annotations

import re

import pytest

from vigil.contract.hosts import LIVE_INDEX_MARKER, REBALANCE_PREFIX, host_id_pattern
from vigil.observers.ecs_tasks import MAX_CLIENT_TOKEN, MAX_STARTED_BY, shortened, started_by
from vigil.observers.reconciler.placer import random_host_id


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: case-sensitive, ``*`` any run of characters, ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


@pytest.mark.parametrize("kind", ["tick", "ticker", "tick-a", "t" * 63])
def test_a_kind_s_pattern_matches_its_own_host_ids_and_no_other_key(kind: str) -> None:
    others = {"tick", "ticker", "tick-a", "t" * 63, "t"} - {kind}
    pattern = host_id_pattern(kind)
    for _ in range(20):
        assert string_like(pattern, random_host_id(kind)), pattern
        for other in others:
            assert not string_like(pattern, random_host_id(other)), (pattern, other)
    markers = [LIVE_INDEX_MARKER, *(REBALANCE_PREFIX + k for k in (kind, *others))]
    assert not any(string_like(pattern, marker) for marker in markers)


def test_the_matcher_follows_iam_string_like() -> None:
    assert string_like("tick_*", "tick_") and string_like("a?c", "abc")
    assert not string_like("tick_*", "Tick_1") and not string_like("tick_*", "xtick_1")


def test_a_long_kind_s_hosts_keep_distinct_client_tokens_within_ecs_limits() -> None:
    """The whole kind is in the id now (63 + 13 characters): ECS's limits are met by a hash."""
    first, second = (random_host_id("k" * 63) for _ in range(2))
    tokens = {shortened(first, MAX_CLIENT_TOKEN), shortened(second, MAX_CLIENT_TOKEN)}
    assert len(tokens) == 2 and all(len(t) <= MAX_CLIENT_TOKEN for t in tokens)
    assert len(started_by(first)) <= MAX_STARTED_BY

"""Pages of a ranked listing (``vigil.listing``): through 200 entries nothing is lost or repeated,
even while entries change rank between pages, and a token is refused when it cannot be read
against this listing. Pure: the whole module runs in well under a second (the property test:
~0.5 s for its 25 examples)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.listing import (
    MAX_LIMIT,
    InvalidListing,
    InvalidToken,
    check_limit,
    check_prefix,
    paginate,
    parse_statuses,
)

NAMES = [f"job-{i:03d}" for i in range(200)]


def walk(
    ranks: dict[str, int], limit: int, change: dict[int, dict[str, int]] | None = None
) -> list[list[str]]:
    """Every page, in order; ``change[n]`` re-ranks entries before page ``n`` is read."""
    change = change or {}
    pages, token = [], None
    for number in range(10_000):
        ranks = {**ranks, **change.get(number, {})}
        page = paginate(
            NAMES,
            (((rank,), name, name) for name, rank in ranks.items()),
            limit=limit,
            token=token,
            filters="",
        )
        pages.append(page.entries)
        token = page.next
        if token is None:
            return pages
    raise AssertionError("never ended")


def test_every_entry_once_failing_first_then_by_name() -> None:
    ranks = {name: (0 if name.endswith("7") else 1) for name in NAMES}
    pages = walk(ranks, limit=30)
    listed = [name for page in pages for name in page]
    assert len(pages) == 7 and [len(p) for p in pages] == [30] * 6 + [20]
    assert listed == sorted(NAMES, key=lambda n: (ranks[n], n))


def test_an_entry_that_changes_rank_between_pages_is_neither_lost_nor_repeated() -> None:
    ranks = dict.fromkeys(NAMES, 1)
    # After the first page, job-150 starts failing (it moves ahead of the cursor) and job-010,
    # already shown, moves behind it: keyset paging would lose the first and repeat the second.
    pages = walk(ranks, limit=50, change={1: {"job-150": 0, "job-010": 2}})
    listed = [name for page in pages for name in page]
    assert sorted(listed) == NAMES
    assert pages[1][0] == "job-150"


@settings(max_examples=25, deadline=None)
@given(
    limit=st.integers(7, 80),
    first=st.lists(st.integers(0, 3), min_size=200, max_size=200),
    changes=st.dictionaries(
        st.integers(1, 6), st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3)), max_size=3
    ),
)
def test_any_ranks_and_changes_list_each_entry_exactly_once(
    limit: int, first: list[int], changes: dict[int, dict[str, int]]
) -> None:
    pages = walk(dict(zip(NAMES, first, strict=True)), limit, change=changes)
    listed = [name for page in pages for name in page]
    assert sorted(listed) == NAMES
    assert all(len(page) <= limit for page in pages)


def test_a_filtered_listing_counts_what_matches_and_pages_only_that() -> None:
    page = paginate(
        NAMES,
        (((0,), n, n) for n in NAMES if n.startswith("job-1")),
        limit=40,
        token=None,
        filters="prefix=job-1",
    )
    assert page.matching == 100 and len(page.entries) == 40 and page.next


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("not-a-token!", "not a page token"),
        ("AAAA", "not a page token"),
        ("", None),
    ],
)
def test_a_token_that_is_not_one_is_refused_naming_next(token: str, why: str | None) -> None:
    def read() -> object:
        return paginate(NAMES, [], limit=10, token=token or None, filters="")

    if why is None:
        assert read()
        return
    with pytest.raises(InvalidToken, match=why) as refused:
        read()
    assert refused.value.field == "next"


def test_a_token_of_other_filters_or_of_another_catalog_is_refused() -> None:
    ranked = [((0,), n, n) for n in NAMES]
    token = paginate(NAMES, ranked, limit=10, token=None, filters="status=FAILED").next
    assert token
    with pytest.raises(InvalidToken, match="other filters"):
        paginate(NAMES, ranked, limit=10, token=token, filters="status=LATE")
    with pytest.raises(InvalidToken, match="deploy changed the list"):
        paginate([*NAMES, "job-new"], ranked, limit=10, token=token, filters="status=FAILED")
    assert len(token) == 46  # 1 + 8 + 25 bytes for 200 names


def test_limits_statuses_and_prefixes_are_checked_naming_the_field() -> None:
    assert check_limit(None) == 50 and check_limit(MAX_LIMIT) == MAX_LIMIT
    for bad in (0, MAX_LIMIT + 1):
        with pytest.raises(InvalidListing, match="limit: must be from 1"):
            check_limit(bad)
    assert parse_statuses(["failed,late", " Paused"], ["FAILED", "LATE", "PAUSED"]) == {
        "FAILED",
        "LATE",
        "PAUSED",
    }
    with pytest.raises(InvalidListing, match="status: unknown BROKEN; one or more of FAILED"):
        parse_statuses("failed,broken", ["FAILED"])
    assert check_prefix("job-", lambda p: p.islower()) == "job-"
    with pytest.raises(InvalidListing, match="prefix: 'Job' starts no valid name"):
        check_prefix("Job", lambda p: p.islower())

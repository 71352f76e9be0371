"""Pages of a ranked listing (jobs, task kinds) that lose and repeat nothing while states change.

An operator's list puts what needs attention first (failing, then late, then paused, then the
rest by name), and an entry's rank changes whenever its state does. A page token that remembers
"after rank r, name n" (keyset paging) would skip an entry that moves up behind the cursor and
repeat one that moves down. So the token remembers *which entries were shown*: one bit per name
of the whole (name-sorted) catalog, with a digest of that catalog and of the filters. The next
page ranks the entries not shown yet, as they are now, and takes the first ``limit``:

* no entry appears twice in one walk through the pages;
* an entry that matches the filters on every page appears exactly once; one whose state changes
  so it stops (or starts) matching may be left out (or shown) on the page where it changes;
* a token read against another catalog (a deploy added or removed an entry) or other filters
  is refused (:class:`InvalidToken`): its bits would name other entries.

A token is ``1 + 8 + ceil(n / 8)`` bytes, URL-safe base64: 46 characters for 200 entries.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

TOKEN_VERSION = 1
DIGEST_BYTES = 8
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
"""The largest page an API route or the CLI gives (a page is one answer: keep it small)."""


class InvalidListing(ValueError):
    """A listing request refused, naming the field as the request names it (``status``,
    ``limit``, ``next``, ``prefix``): the API answers ``invalid_<field>``, the CLI exits 1."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class InvalidToken(InvalidListing):
    def __init__(self, problem: str) -> None:
        super().__init__("next", problem)


@dataclass(frozen=True)
class Page(Generic[T]):
    entries: list[T]
    next: str | None
    """The token of the next page; None on the last."""
    matching: int
    """How many entries match the filters and were not on an earlier page (this page's too)."""


def check_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidListing("limit", f"must be from 1 to {MAX_LIMIT}, got {limit}")
    return limit


def check_prefix(prefix: str | None, rule: Callable[[str], bool]) -> str:
    """A name prefix (``""``: all): refused when no name could start with it."""
    if not prefix:
        return ""
    if len(prefix) > 64 or not rule(prefix):
        raise InvalidListing("prefix", f"{prefix!r} starts no valid name")
    return prefix


def parse_statuses(raw: str | Iterable[str] | None, known: Sequence[str]) -> frozenset[str]:
    """``FAILED,late`` (any case, commas or repeated) -> the upper-case set; empty is all."""
    if raw is None:
        return frozenset()
    parts = raw.split(",") if isinstance(raw, str) else [p for r in raw for p in r.split(",")]
    wanted = frozenset(p.strip().upper() for p in parts if p.strip())
    unknown = sorted(wanted - set(known))
    if unknown:
        raise InvalidListing(
            "status", f"unknown {', '.join(unknown)}; one or more of {', '.join(known)}"
        )
    return wanted


@dataclass(frozen=True)
class Query:
    """A listing request, checked: :meth:`parse` names the field it refuses."""

    statuses: frozenset[str]
    """Upper case; empty: every state."""
    prefix: str
    limit: int
    token: str | None

    @classmethod
    def parse(
        cls,
        states: Sequence[str],
        name: re.Pattern[str],
        *,
        status: str | Iterable[str] | None = None,
        prefix: str | None = None,
        limit: int | None = None,
        token: str | None = None,
    ) -> Query:
        """``states``: those ``status`` may name; ``name``: the rule of a whole name (a prefix of
        a name is one too)."""
        return cls(
            parse_statuses(status, states),
            check_prefix(prefix, lambda p: name.match(p) is not None),
            check_limit(limit),
            token or None,
        )

    @property
    def filters(self) -> str:
        """What a page token is bound to (with the catalog)."""
        return f"status={','.join(sorted(self.statuses))};prefix={self.prefix}"

    def page(
        self, universe: Sequence[str], matching: Iterable[tuple[tuple[object, ...], str, T]]
    ) -> Page[T]:
        """The next page of ``matching`` (:func:`paginate`) under this query's limit and token."""
        return paginate(
            universe, matching, limit=self.limit, token=self.token, filters=self.filters
        )


def paginate(
    universe: Sequence[str],
    matching: Iterable[tuple[tuple[object, ...], str, T]],
    *,
    limit: int,
    token: str | None,
    filters: str,
) -> Page[T]:
    """The next page of ``matching`` (``(rank, name, entry)``, lowest rank first, then by name).

    ``universe``: every name the listing can hold (the catalog), whatever the filters;
    ``filters``: what the request filtered by, as text; both must be what the token was made
    with. Raises :class:`InvalidToken`."""
    names = sorted(universe)
    position = {name: index for index, name in enumerate(names)}
    digest = _digest(names, filters)
    shown = _decode(token, digest, len(names)) if token else bytearray((len(names) + 7) // 8)
    remaining = sorted(
        (
            (rank, name, entry)
            for rank, name, entry in matching
            if name in position and not _bit(shown, position[name])
        ),
        key=lambda ranked: (ranked[0], ranked[1]),
    )
    page = remaining[:limit]
    for _, name, _ in page:
        index = position[name]
        shown[index // 8] |= 1 << (index % 8)
    more = len(remaining) > limit
    return Page(
        [entry for _, _, entry in page],
        _encode(digest, shown) if more else None,
        len(remaining),
    )


def _digest(names: Sequence[str], filters: str) -> bytes:
    text = "\n".join([filters, *names])
    return hashlib.sha256(text.encode()).digest()[:DIGEST_BYTES]


def _bit(shown: bytearray, index: int) -> bool:
    return bool(shown[index // 8] >> (index % 8) & 1)


def _encode(digest: bytes, shown: bytearray) -> str:
    raw = bytes([TOKEN_VERSION]) + digest + bytes(shown)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(token: str, digest: bytes, count: int) -> bytearray:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken("not a page token this listing printed") from None
    size = 1 + DIGEST_BYTES + (count + 7) // 8
    if len(raw) < 1 + DIGEST_BYTES or raw[0] != TOKEN_VERSION:
        raise InvalidToken("not a page token this listing printed")
    if raw[1 : 1 + DIGEST_BYTES] != digest or len(raw) != size:
        raise InvalidToken(
            "made for other filters, or before a deploy changed the list: list again from the "
            "first page (without next)"
        )
    return bytearray(raw[1 + DIGEST_BYTES :])

"""A name the app does not have: the error says which ones it has."""

from __future__ import annotations

from collections.abc import Iterable


class UnknownName(LookupError):
    """``what`` ``name`` is not in the app; the message lists the ones that are."""

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        self.what = what
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(self.known) or "none"
        super().__init__(f"no {what} {name!r} in this app; {what}s: {listed}")

    def __str__(self) -> str:
        return str(self.args[0])


def check(what: str, name: str, known: Iterable[str]) -> str:
    names = set(known)
    if name not in names:
        raise UnknownName(what, name, names)
    return name

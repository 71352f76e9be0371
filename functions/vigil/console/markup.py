"""HTML built one way: text and attribute values always pass through :func:`html.escape`.

:class:`Safe` marks markup built here; anything else given to :func:`tag` is text and is escaped.
So a job name, an error message or a payload excerpt can never become markup, whatever it holds
(``tests/console/test_hostile.py`` parses every page to prove it).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

VOID = frozenset({"input", "br", "hr", "meta"})


class Safe(str):
    """Markup built by this module (never text from data)."""


Child = Any
"""A Safe (kept), None (nothing) or anything else (its ``str``, escaped)."""


def text(value: Any) -> Safe:
    return Safe(html.escape("" if value is None else str(value), quote=True))


def join(children: Iterable[Child]) -> Safe:
    return Safe("".join(c if isinstance(c, Safe) else text(c) for c in children if c is not None))


def tag(element: str, /, *children: Child, **attrs: Any) -> Safe:
    """``<element attrs>children</element>``; an attribute named ``class_`` is ``class``; a None or
    False attribute is left out, True is written bare."""
    parts = [element]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        parts.append(attr if value is True else f'{attr}="{html.escape(str(value), quote=True)}"')
    opening = f"<{' '.join(parts)}>"
    if element in VOID:
        return Safe(opening)
    return Safe(f"{opening}{join(children)}</{element}>")


def table(header: Iterable[str], rows: Iterable[Iterable[Child]], **attrs: Any) -> Safe:
    head = tag("tr", *(tag("th", h) for h in header))
    body = (tag("tr", *(tag("td", cell) for cell in row)) for row in rows)
    return tag("table", tag("thead", head), tag("tbody", *body), **attrs)


def short(value: Any, limit: int = 120) -> str:
    """A long text cut (an error message, a payload excerpt): the page stays readable."""
    shown = "" if value is None else str(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"

"""Markdown pieces every generated page uses: tables, code spans, docstring text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

GENERATED = (
    "<!-- Generated from the code by docsgen at build time: edit the code's docstrings, "
    "not this page. -->"
)
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?([^`]+)`")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; cells are single lines with ``|`` escaped."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(" --- " for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or " "


def code(text: str) -> str:
    """A code span that holds any text (backticks included)."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}" if text else ""


def prose(docstring: str) -> str:
    """A docstring as Markdown: Sphinx roles become code spans; RST's double backticks already
    read as code in Markdown."""
    return _ROLE.sub(r"`\1`", docstring.strip())


def anchor(*parts: str) -> str:
    """A stable HTML id from ``parts``: lowercase, each run of anything but letters, digits and
    ``_`` one ``-``. The guides and the runbooks link to these ids, so they are the reference's
    interface: ``anchor("vigil", "jobs", "history")`` is ``vigil-jobs-history``."""
    return re.sub(r"[^a-z0-9_]+", "-", "-".join(parts).lower()).strip("-")


def heading(level: int, text: str, id_: str) -> str:
    """A heading with an explicit id (``attr_list``), so a link to it does not depend on how the
    ``toc`` extension would slug its text (code spans, braces)."""
    return f"{'#' * level} {text} {{#{id_}}}\n"


def target(id_: str) -> str:
    """An empty anchor with ``id_``, for a link to a table row (a parameter, a metric)."""
    return f'<a id="{id_}"></a>'


def page(title: str, intro: str, *sections: str) -> str:
    return (
        "\n".join([f"# {title}", "", GENERATED, "", intro.strip(), "", *sections]).rstrip() + "\n"
    )

"""The code as griffe reads it: statically, from the checkout (no import, so no CDK and no node
process), with Google-style docstrings (``Args:`` sections)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parent.parent
SEARCH_PATHS = [ROOT, ROOT / "functions"]


@cache
def _loader() -> griffe.GriffeLoader:
    return griffe.GriffeLoader(search_paths=SEARCH_PATHS, docstring_parser=griffe.Parser.google)


def module(name: str) -> griffe.Module:
    """``name``'s package or module, loaded once per process."""
    loader = _loader()
    top = name.split(".")[0]
    package = (
        loader.modules_collection.get_member(top) if top in loader.modules_collection else None
    )
    if package is None:
        package = loader.load(top)
    found = package if name == top else package[name.split(".", 1)[1]]
    assert isinstance(found, griffe.Module), name
    return found


def docstring(obj: griffe.Object | griffe.Alias) -> str:
    return obj.docstring.value if obj.docstring else ""


def summary(obj: griffe.Object | griffe.Alias) -> str:
    """A docstring's text before its first sections (``Args:``)."""
    if not obj.docstring:
        return ""
    texts = []
    for section in obj.docstring.parsed:
        if section.kind is not griffe.DocstringSectionKind.text:
            break
        texts.append(str(section.value))
    return "\n\n".join(texts)


def documented_parameters(obj: griffe.Object | griffe.Alias) -> dict[str, str]:
    """``{parameter: text}`` from the docstring's ``Args:`` section."""
    if not obj.docstring:
        return {}
    found: dict[str, str] = {}
    for section in obj.docstring.parsed:
        if section.kind is griffe.DocstringSectionKind.parameters:
            found |= {param.name: param.description for param in section.value}
    return found

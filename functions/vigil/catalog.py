"""A stack's catalogs of jobs and tasks, read from SSM parameters and kept for a while.

The stack writes each catalog as a few standard SSM parameters under
``/vigil/<stack>/<jobs|tasks>/`` (``vigil.contract.layout.catalog_path``): parts ``0``, ``1``, ...
each a JSON object of some entries, and ``stack`` for what every entry shares. Any size fits:
one more part per few entries, never an environment variable past Lambda's 4 KB. A reader lists
the path (one ``GetParametersByPath`` per ten parameters) and keeps the answer for ``max_age``:
a deploy that adds or changes entries reaches warm processes within it, and the stack's own
functions carry the catalog's digest in their environment, so a change of declarations replaces
their containers at once (:data:`DIGEST_ENV`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from vigil.clock import Clock, system_clock
from vigil.contract.layout import CATALOG_DIGEST_ENV as DIGEST_ENV
from vigil.contract.layout import CATALOG_SHARED_PART as SHARED_PART
from vigil.contract.layout import STACK_ENV as STACK_ENV
from vigil.contract.layout import Catalogued, catalog_path
from vigil.settings import SettingsError

__all__ = [
    "DIGEST_ENV",
    "SHARED_PART",
    "STACK_ENV",
    "CatalogParts",
    "Kept",
    "read_catalog",
]
DEFAULT_MAX_AGE = timedelta(minutes=1)


@dataclass(frozen=True)
class CatalogParts:
    """A catalog as stored: the entries, by name, and what they share."""

    entries: dict[str, dict[str, Any]]
    shared: dict[str, Any]


def read_catalog(ssm: Any, stack: str, catalogued: Catalogued) -> CatalogParts:
    """Every part under the catalog's path, merged; nothing there is an empty catalog (a stack
    without tasks). A part that is not a JSON object raises :class:`SettingsError` naming it."""
    entries: dict[str, dict[str, Any]] = {}
    shared: dict[str, Any] = {}
    paginator = ssm.get_paginator("get_parameters_by_path")
    for page in paginator.paginate(Path=catalog_path(stack, catalogued), Recursive=False):
        for parameter in page.get("Parameters", []):
            name = str(parameter["Name"])
            try:
                value = json.loads(parameter["Value"])
            except (ValueError, TypeError):
                raise SettingsError(f"catalog part {name} is not JSON") from None
            if not isinstance(value, dict):
                raise SettingsError(f"catalog part {name} is not a JSON object")
            if name.rsplit("/", 1)[-1] == SHARED_PART:
                shared.update(value)
            else:
                entries.update(value)
    return CatalogParts(entries, shared)


@dataclass
class Kept:
    """What ``read()`` returned, read again once it is older than ``max_age`` (or on demand:
    :meth:`refresh`, when a name is missing that a deploy may just have added)."""

    read: Callable[[], Any]
    max_age: timedelta = DEFAULT_MAX_AGE
    clock: Clock = system_clock
    _value: Any = None
    _at: datetime | None = field(default=None, repr=False)

    def get(self) -> Any:
        now = self.clock()
        if self._at is None or now - self._at >= self.max_age:
            self._value = self.read()
            self._at = now
        return self._value

    def refresh(self) -> Any:
        self._at = None
        return self.get()

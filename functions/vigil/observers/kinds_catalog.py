"""The observer kinds of a stack, from its kinds catalog (``vigil.catalog``), for the management
API and the reconciler: their environment names the stack, not every kind, so it stays under
Lambda's 4 KB however many kinds the stack declares.

Each variable a process finds in its environment wins (tests, a stack from before the
catalog); the rest are read from the catalog once per process: a deploy that changes a kind
changes the digest in the functions' environment (``vigil.catalog.DIGEST_ENV``), which replaces
their warm containers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from vigil.catalog import STACK_ENV, read_catalog
from vigil.contract.hosts import PLACEMENTS_ENV
from vigil.contract.layout import Catalogued, KindField

KINDS_ENV = "VIGIL_OBSERVER_KINDS"
"""kind -> ``module.function``."""
TASK_DEFINITIONS_ENV = "VIGIL_TASK_DEFINITIONS"
"""kind -> its task definition's ARN."""
FIELDS = {
    KINDS_ENV: KindField.HANDLER,
    PLACEMENTS_ENV: KindField.OPTIONS,
    TASK_DEFINITIONS_ENV: KindField.TASK_DEFINITION,
}


def with_kinds(environ: Mapping[str, str], ssm: Callable[[], Any]) -> dict[str, str]:
    """``environ`` with each of :data:`FIELDS`' variables it lacks read from the kinds catalog of
    its stack (``VIGIL_STACK``; ``ssm`` makes the client, only when one is read)."""
    env = dict(environ)
    missing = [name for name in FIELDS if name not in env]
    if not missing or not env.get(STACK_ENV):
        return env
    entries = read_catalog(ssm(), env[STACK_ENV], Catalogued.KINDS).entries
    for name in missing:
        field = FIELDS[name]
        env[name] = json.dumps(
            {kind: entry[field] for kind, entry in entries.items() if field in entry}
        )
    return env

"""A narrow workaround that makes moto's (5.2.1) SQS ``GetQueueAttributes`` cheap.

moto answers every ``GetQueueAttributes`` (and every ``ReceiveMessage``, which reads the queue's
attributes too) by building the queue's whole attribute map, turning each of its twenty-odd
attribute names from CamelCase into snake_case with ``camelcase_to_underscores`` on the way: a
character-by-character walk, about 40 a request. A profile of ``vigil tasks summary`` over 200
tasks (``benchmarks/operators_scale.py``: 230 requests) put most of moto's time there.

The answer depends on the name alone, and the names are a fixed set: :func:`install` has the SQS
models call the same function through a cache. Nothing else changes: the same names, the same
attributes, the same order. ``tests/local/test_moto_names.py`` checks the answers and pins the
moto code. ``VIGIL_MOTO_AS_IS=1`` leaves moto as it is.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from vigil_tools.emulator.moto_memory import AS_IS

RENAME = "camelcase_to_underscores"
"""The function the SQS models reach through their module's global."""
CACHED_NAMES = 1024
"""Distinct names kept (SQS's attributes are about 30)."""

_original: dict[str, Any] = {}


def install() -> bool:
    """Apply it (once; idempotent). False when ``VIGIL_MOTO_AS_IS`` says not to."""
    if os.environ.get(AS_IS, "") not in ("", "0"):
        return False
    if _original:
        return True
    from moto.sqs import models

    names = vars(models)
    _original[RENAME] = names[RENAME]
    names[RENAME] = functools.lru_cache(maxsize=CACHED_NAMES)(names[RENAME])
    return True


def uninstall() -> None:
    """Put moto back as it was (tests of this module)."""
    if not _original:
        return
    from moto.sqs import models

    vars(models)[RENAME] = _original.pop(RENAME)


def installed() -> bool:
    return bool(_original)

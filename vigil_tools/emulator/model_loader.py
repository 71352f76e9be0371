"""One botocore model loader for every boto3 session of the process (the suite's tests).

``mock_aws`` sets ``boto3.DEFAULT_SESSION`` to None each time it starts (moto's
``reset_boto3_session``), so each test's first ``boto3.client(...)`` builds a new session, and a
new session builds a new loader that reads and decodes each service's JSON model from disk again:
a profile of ``tests/tasks/test_enqueue.py`` put about a third of its CPU in creating clients, most
of it ``json`` decoding models already decoded by the previous test. The models on disk do not
change while the process runs and botocore treats a loaded model as read-only (one session's
clients already share its loader's), so :func:`install` gives every session the same loader for a
given data path. Sessions, credentials, clients and moto's reset stay per test, as before.
"""

from __future__ import annotations

import functools
from typing import Any

import botocore.loaders
import botocore.session

_create_loader = botocore.loaders.create_loader


@functools.cache
def _shared_loader(search_path_string: str | None = None) -> Any:
    return _create_loader(search_path_string)


def install() -> None:
    """New botocore sessions take the process's loader for their data path (idempotent)."""
    botocore.session.create_loader = _shared_loader  # type: ignore[attr-defined]


def uninstall() -> None:
    botocore.session.create_loader = _create_loader  # type: ignore[attr-defined]


def installed() -> bool:
    return botocore.session.create_loader is _shared_loader  # type: ignore[attr-defined]

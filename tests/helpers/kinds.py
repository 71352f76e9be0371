"""A kit test's own observer kind: the deployed kind ``ticker`` runs a module written for the test."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def ticker_runs(
    module: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Every container of kind ``ticker`` runs ``module.run`` (``source``, written to
    ``tmp_path``), imported afresh per generation as a new container imports it."""
    from vigil_tools.testing import fleet

    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    deployed = fleet.container_environment

    def environment(*args: Any) -> dict[str, str]:
        kinds = {"ticker": f"{module}.run"}
        return {**deployed(*args), "VIGIL_OBSERVER_KINDS": json.dumps(kinds)}

    monkeypatch.setattr(fleet, "container_environment", environment)
    try:
        yield
    finally:
        sys.modules.pop(module, None)

"""The contract between infra and the runtime stays a leaf: infra imports it at synth without the
runtime, and the runtime imports it without paying for anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("boto3", "botocore", "aws_lambda_powertools", "pydantic", "aws_xray_sdk")
EVERY_CONTRACT_MODULE = (
    "import importlib, pkgutil, vigil.contract as contract; "
    "[importlib.import_module(f'vigil.contract.{m.name}') "
    "for m in pkgutil.iter_modules(contract.__path__)]"
)
LOADED = "import json, sys; print(json.dumps({n: getattr(m, '__file__', None) for n, m in sys.modules.items()}))"


def loaded_after(statement: str, cwd: Path) -> dict[str, str | None]:
    """Module name -> file, in a fresh interpreter without the suite's PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", f"{statement}; {LOADED}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, str | None] = json.loads(result.stdout)
    return loaded


def runtime_modules(loaded: dict[str, str | None]) -> dict[str, str | None]:
    return {name: file for name, file in loaded.items() if name.split(".")[0] == "vigil"}


def test_importing_the_contract_loads_the_standard_library_only() -> None:
    loaded = loaded_after(EVERY_CONTRACT_MODULE, cwd=ROOT / "functions")

    assert {"vigil.contract.jobs", "vigil.contract.metrics", "vigil.contract.observers"} <= set(
        loaded
    )
    assert not [name for name in loaded if name.split(".")[0] in HEAVY]
    assert set(runtime_modules(loaded)) <= {"vigil", "vigil.contract"} | {
        name for name in loaded if name.startswith("vigil.contract.")
    }


def test_the_app_imports_nothing_from_the_runtime_but_the_contract() -> None:
    """As ``python app.py`` and ``cdk synth`` run it: from the checkout, no PYTHONPATH."""
    loaded = loaded_after("import app", cwd=ROOT)

    assert "infra.stack" in loaded
    runtime = runtime_modules(loaded)
    assert all(name == "vigil" or name.startswith("vigil.contract") for name in runtime)
    assert str(runtime["vigil.contract.observers"]).startswith(str(ROOT / "functions"))

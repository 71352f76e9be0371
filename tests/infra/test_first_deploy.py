"""What a first real deploy depends on: the layer and image run what the suite ran, unique names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Template

from infra.function import powertools_layer_parameter
from infra.monitoring import Monitoring
from infra.pins import PinError, pinned, pinned_versions
from vigil_tools.emulator.deploy import _with_public_parameters
from vigil_tools.emulator.template import Synthesized

PINNED_POWERTOOLS = pinned("aws-lambda-powertools")


def lambda_asset_dir(synthesized: Synthesized) -> Path:
    """The folder the Lambda functions' code asset is zipped from."""
    folders = {
        synthesized.outdir / asset["source"]["path"]
        for asset in synthesized.assets["files"].values()
        if (synthesized.outdir / asset["source"]["path"] / "handlers").is_dir()
    }
    assert len(folders) == 1, folders
    return folders.pop()


def test_the_suite_runs_the_powertools_version_requirements_pins() -> None:
    assert version("aws-lambda-powertools") == PINNED_POWERTOOLS


def test_every_function_gets_the_layer_published_for_the_pinned_powertools(
    synthesized: Synthesized,
) -> None:
    parameters = synthesized.template["Parameters"]
    layer = [
        key
        for key, parameter in parameters.items()
        if parameter["Default"].startswith("/aws/service/powertools/")
    ]
    assert len(layer) == 1
    assert parameters[layer[0]] == {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": f"/aws/service/powertools/python/arm64/python3.12/{PINNED_POWERTOOLS}",
    }
    functions = synthesized.resources("AWS::Lambda::Function").values()
    assert functions
    for function in functions:
        assert function["Properties"]["Layers"] == [{"Ref": layer[0]}]
        assert function["Properties"]["Runtime"] == "python3.12"
        assert function["Properties"]["Architectures"] == ["arm64"]


def test_the_layer_parameter_names_the_runtime_and_architecture_of_the_functions() -> None:
    assert powertools_layer_parameter() == (
        f"/aws/service/powertools/python/arm64/python3.12/{PINNED_POWERTOOLS}"
    )


def test_the_lambda_asset_imports_on_its_own_against_the_pinned_powertools(
    synthesized: Synthesized,
) -> None:
    """Import every module of the shipped asset from the asset folder alone, as Lambda does.

    A module that needs a newer Powertools than the layer's, or something the asset does not ship,
    fails here instead of as ``Runtime.ImportModuleError`` in the account.
    """
    asset = lambda_asset_dir(synthesized)
    modules = sorted(
        ".".join(path.relative_to(asset).with_suffix("").parts).removesuffix(".__init__")
        for path in asset.rglob("*.py")
    )
    assert "handlers.reconciler" in modules
    # What the test virtualenv has but Lambda does not (the runtime gives boto3, the layer gives
    # Powertools, pydantic and the X-Ray SDK): an import of any of these must fail here too.
    absent = ["croniter", "moto", "aws_cdk", "constructs", "jsii", "packaging", "freezegun"]
    absent += ["hypothesis", "pytest", "vigil_tools", "infra"]
    probe = (
        "import importlib, json, sys\n"
        f"for name in {absent!r}: sys.modules[name] = None\n"
        "import aws_lambda_powertools.shared.version as pv\n"
        "loaded = {}\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    loaded[name] = importlib.import_module(name).__file__\n"
        "print(json.dumps({'powertools': pv.VERSION, 'files': loaded}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(asset), POWERTOOLS_TRACE_DISABLED="true")
    result = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(modules)],
        cwd=asset,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["powertools"] == PINNED_POWERTOOLS
    outside = [f for f in report["files"].values() if not Path(f).is_relative_to(asset)]
    assert outside == [], "every module must come from the asset, not the repository"


def test_dashboard_names_differ_per_stack_and_region() -> None:
    names = []
    for stack_name, region in (
        ("Vigil", "us-east-1"),
        ("Vigil", "eu-west-1"),
        ("Staging", "us-east-1"),
    ):
        stack = Stack(App(), stack_name, env=Environment(account="123456789012", region=region))
        Monitoring(stack, "Monitoring", jobs=[])
        dashboards = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard")
        names += [d["Properties"]["DashboardName"] for d in dashboards.values()]
    assert names == ["Vigil-us-east-1", "Vigil-eu-west-1", "Staging-us-east-1"]


def test_a_requirements_file_without_the_pin_is_a_clear_error(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("boto3==1.0.0\naws-lambda-powertools>=3\n")
    assert pinned("boto3", requirements) == "1.0.0"
    with pytest.raises(PinError, match="must pin aws-lambda-powertools with '=='"):
        pinned("aws-lambda-powertools", requirements)
    requirements.write_text("boto3 @@ 1\n")
    with pytest.raises(PinError, match=r"requirements.txt:1"):
        pinned_versions(requirements)


class _NoSsm:
    def client(self, name: str) -> Any:
        raise AssertionError("nothing may be written for a parameter the emulator cannot provide")


def test_the_emulator_refuses_a_public_parameter_it_does_not_know() -> None:
    synth = Synthesized(
        outdir=Path("."),
        template={
            "Parameters": {
                "Ami": {
                    "Type": "AWS::SSM::Parameter::Value<String>",
                    "Default": "/aws/service/unknown/thing",
                }
            }
        },
        assets={},
    )
    with pytest.raises(ValueError, match="does not provide AWS's public parameter"):
        _with_public_parameters(synth.template, _NoSsm(), "us-east-1")

"""The emulator's Lambda starts new containers after a deploy changed a function, as Lambda does:
a handler that cached its environment at import reads the new one (a deploy that names a new task
definition revision reaches the reconciler this way)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import boto3

from tests.helpers.lambdas import deploy_function
from vigil_tools.emulator.lambda_runtime import LocalLambda

HANDLER = "cached_env_handler"


def test_a_configuration_update_reimports_the_handler(aws: None, tmp_path: Path) -> None:
    session = boto3.session.Session(region_name="us-east-1")
    functions = deploy_function(
        session,
        tmp_path,
        HANDLER,
        "import os\nREAD_AT_IMPORT = os.environ['SETTING']\n"
        "def handler(event, context):\n    return READ_AT_IMPORT\n",
        environment={"SETTING": "old"},
    )
    local = LocalLambda(
        session, now=lambda: datetime.now(UTC), advance=lambda _: None, functions_dir=tmp_path
    )

    first = local.invoke("f", {})
    again = local.invoke("f", {})
    functions.update_function_configuration(
        FunctionName="f", Environment={"Variables": {"SETTING": "new"}}
    )
    deployed = local.invoke("f", {})

    assert (first.payload, again.payload, deployed.payload) == ("old", "old", "new")

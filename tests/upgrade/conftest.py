"""The one-stack, name-keyed deployment of main at db5f9af (``tests/helpers/upgrade.py``) on a
fresh emulator: what the upgrade tests deploy today's app over."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from freezegun import freeze_time
from moto import mock_aws
from moto.moto_api import state_manager

from tests.helpers.upgrade import name_keyed_app
from vigil_tools.emulator.account import REGION, deploy_account
from vigil_tools.testing.plugin import START
from vigil_tools.testing.stack import VigilStack


@pytest.fixture
def old_stack(tmp_path: Path) -> Iterator[VigilStack]:
    """main's app deployed on a fresh emulator, on a simulated clock."""
    default_session = boto3.DEFAULT_SESSION
    with mock_aws(), freeze_time(START) as frozen:
        state_manager.set_transition(
            model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
        )
        boto3.setup_default_session(
            region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
        )
        account = deploy_account(name_keyed_app(tmp_path / "cdk.out"), boto3.DEFAULT_SESSION)
        stack = VigilStack(account, now=lambda: datetime.now(UTC), move_to=frozen.move_to)
        try:
            yield stack
        finally:
            stack.close()
            stack.fleet.kill_all()
            state_manager.unset_transition(model_name="ecs::task")
            boto3.DEFAULT_SESSION = default_session

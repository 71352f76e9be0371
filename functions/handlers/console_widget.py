"""Lambda handler of the console's custom widgets (``vigil.console``): the view function and the
operate function run this same code, told apart by ``VIGIL_CONSOLE_ROLE``.

Thin on purpose: the services (catalogs read from SSM, boto3 clients) are built at the first
invocation, not at import, and an invocation is handed to ``vigil.console.widget.answer``. The
answer is the HTML the dashboard shows.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.console.controls import CwdbControls, FormControls
from vigil.console.services import ConsoleServices
from vigil.console.settings import ConsoleSettings, build_services
from vigil.console.widget import answer
from vigil.contract.console import Role

logger = telemetry.logger()
FORMS_PARAM = "vigil_forms"
"""Set by ``vigil local up``'s console: draw buttons as forms for a plain browser."""
_built: tuple[ConsoleSettings, ConsoleServices] | None = None
SERVICES = ("dynamodb", "sqs", "ssm", "lambda", "cloudwatch", "scheduler", "s3")


def built() -> tuple[ConsoleSettings, ConsoleServices]:
    global _built
    if _built is None:
        settings = ConsoleSettings.from_env(os.environ)
        _built = (settings, build_services(settings, {s: boto3.client(s) for s in SERVICES}))
    return _built


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> str:
    settings, services = built()
    own = context.invoked_function_arn
    controls = (
        FormControls()
        if event.get(FORMS_PARAM)
        else CwdbControls(
            view_arn=own,
            operate_arn=settings.operate_arn if settings.role is Role.VIEW else own,
        )
    )
    return answer(
        event,
        services,
        controls,
        settings.role,
        context.aws_request_id,
        operate_function=settings.operate_arn or "the operate function",
    )

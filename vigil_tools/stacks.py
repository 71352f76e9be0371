"""A deployed Vigil stack's outputs, found by stack or by stage: the one place the CLI, the demo
and the testing kit ask CloudFormation (``DescribeStacks``) about a stack."""

from __future__ import annotations

from typing import Any

from vigil.contract.stages import STACK_PREFIX, InvalidStage, check_stage, stack_name

API_OUTPUT = "JobsApiEndpoint"
"""The stack's management API URL (jobs control and, with a fleet, observers)."""


class StackNotFound(LookupError):
    """The stack is not deployed here; the message says which Vigil stacks are."""


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The deployed stack's outputs, or StackNotFound naming the Vigil stacks that exist."""
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except cloudformation.exceptions.ClientError as error:
        deployed = vigil_stacks(cloudformation)
        raise StackNotFound(
            f"stack {stack!r} not found ({error}); Vigil stacks deployed here: "
            + (", ".join(deployed) or "none")
        ) from None
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def vigil_stacks(cloudformation: Any) -> list[str]:
    """The names of the deployed stacks a stage would have (``Vigil``, ``Vigil-NAME``), sorted."""
    names: list[str] = []
    token: str | None = None
    while True:
        page = cloudformation.describe_stacks(**({"NextToken": token} if token else {}))
        names += [s["StackName"] for s in page["Stacks"] if is_vigil_stack(s["StackName"])]
        token = page.get("NextToken")
        if not token:
            return sorted(names)


def is_vigil_stack(name: str) -> bool:
    if name == STACK_PREFIX:
        return True
    stage = name.removeprefix(f"{STACK_PREFIX}-")
    if stage == name:
        return False
    try:
        return stack_name(check_stage(stage)) == name
    except InvalidStage:
        return False


def stage_api_url(cloudformation: Any, stage: str | None) -> str:
    """The stage's API URL from its stack's outputs (``vigil --stage NAME``)."""
    stack = stack_name(stage)
    outputs = stack_outputs(cloudformation, stack)
    if API_OUTPUT not in outputs:
        raise StackNotFound(f"stack {stack!r} has no {API_OUTPUT} output: is it a Vigil stack?")
    return outputs[API_OUTPUT]


def stack_of(args: Any) -> str:
    """The stack a ``vigil jobs``/``vigil tasks`` command reads: ``--stack``, or the ``--stage``'s."""
    return str(args.stack or stack_name(getattr(args, "stage", None)))

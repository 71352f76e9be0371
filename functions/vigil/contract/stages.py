"""Stages: independent copies of the app side by side (staging and production in one account).

A stage is a name given at synth (``cdk deploy -c stage=NAME``). It names the stack, every physical
name derived from the stack's name, and the ``stage`` dimension of every metric
(``vigil.contract.metrics``). Without a stage the app is what it was before stages existed: stack
``Vigil``, the same names and the same metric identities, so an existing deploy updates in place.

The CDK app validates the name here and the CLI (``vigil --stage NAME``) finds the stack by the same
rule.
"""

from __future__ import annotations

import os
import re

STACK_PREFIX = "Vigil"
"""The stack of the default (unnamed) stage; a named stage's stack is ``Vigil-NAME``."""
STAGE_VARIABLE = "VIGIL_STAGE"
"""The environment variable every function and container of a named stage gets."""
TASKS_SCHEDULE_GROUP_SUFFIX = "-tasks"
"""The stack's group of one-time task schedules is the stack's name with this suffix."""

_STAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
# A stack name is [A-Za-z][A-Za-z0-9-]* (CloudFormation); the prefix gives the leading letter.
LONGEST_REGION = "ap-southeast-1"
"""As long as any region's name (14 characters): the dashboard's name ends with its region."""


class InvalidStage(ValueError):
    """A stage name CloudFormation or one of the derived names would refuse."""


def current_stage() -> str | None:
    """The stage this code was deployed in (``VIGIL_STAGE``); None in the default stage."""
    return os.environ.get(STAGE_VARIABLE) or None


def event_source(base: str, stage: str | None) -> str:
    """An EventBridge source of a stage's events: ``base`` in the default stage (as before stages),
    ``base.NAME`` in a named one, so an application's rule of one stage never hears another's."""
    return base if stage is None else f"{base}.{stage}"


def stack_name(stage: str | None) -> str:
    """``Vigil`` without a stage, ``Vigil-NAME`` with one."""
    return STACK_PREFIX if stage is None else f"{STACK_PREFIX}-{stage}"


def tasks_schedule_group(stack: str) -> str:
    return f"{stack}{TASKS_SCHEDULE_GROUP_SUFFIX}"


def dashboard_name(stack: str, region: str) -> str:
    """Dashboard names are unique per account across regions: one per stack and region."""
    return f"{stack}-{region}"


def console_dashboard_name(stack: str, region: str) -> str:
    """The operations dashboard of the console's custom widgets (``infra.console``)."""
    return f"{stack}-console-{region}"


def derived_names(stack: str) -> dict[str, int]:
    """Every explicit name built from the stack's name, with the longest its service accepts.

    The names CloudFormation or the CDK generate (tables, queues, functions, roles, log groups,
    rules, alarms, task families) include the stack's name and are shortened by them to fit. The
    jobs' and tasks' functions are named here (``vigil.contract.layout``): cut to fit, but their
    prefix, the stack's name, is kept whole (one stack's grants over its functions rely on it).
    """
    from vigil.contract.layout import shortest_function_name

    return {
        stack: 128,  # CloudFormation stack name
        tasks_schedule_group(stack): 64,  # EventBridge Scheduler schedule group
        dashboard_name(stack, LONGEST_REGION): 255,  # CloudWatch dashboard
        console_dashboard_name(stack, LONGEST_REGION): 255,  # the console's dashboard
        f"{stack}/one observer's story": 255,  # CloudWatch Logs saved query (the longest)
        shortest_function_name(stack): 64,  # a job's or task's Lambda function, cut at its name
    }


def check_stage(stage: str) -> str:
    """The stage, or :class:`InvalidStage` saying what is wrong with it."""
    if not _STAGE.fullmatch(stage):
        raise InvalidStage(
            f"stage {stage!r}: use letters, digits and inner hyphens only (it becomes part of the "
            f"stack name {STACK_PREFIX}-<stage>, which CloudFormation restricts to [A-Za-z0-9-])"
        )
    for name, limit in derived_names(stack_name(stage)).items():
        if len(name) > limit:
            longest = max_stage_length()
            raise InvalidStage(
                f"stage {stage!r} is {len(stage)} characters; at most {longest} fit: the derived "
                f"name {name!r} would be {len(name)} characters, over its limit of {limit}"
            )
    return stage


def max_stage_length() -> int:
    """The longest stage every derived name has room for (the tightest limit decides)."""
    base = stack_name("")
    return min(limit - len(name) for name, limit in derived_names(base).items())

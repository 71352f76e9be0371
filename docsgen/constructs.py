"""``reference/constructs.md``: the constructs an app declares and the CDK context a deploy takes,
with every parameter's type, default and meaning, read statically from ``infra/`` (griffe: no CDK
import). A construct documents its parameters in an ``Args:`` section of its docstring; a
dataclass (``ObserverKind``) in its fields' docstrings."""

from __future__ import annotations

from dataclasses import dataclass

import griffe

from docsgen import source
from docsgen.markdown import anchor, code, heading, page, prose, table, target

CONSTRUCTS = (
    "infra.stack.VigilStack",
    "infra.scheduled_job.ScheduledJob",
    "infra.background_task.BackgroundTask",
    "infra.observer_fleet.ObserverFleet",
    "infra.observer_fleet.ObserverKind",
    "infra.runs_table.JobRunsTable",
    "infra.tasks_table.TasksTable",
)
"""What an app declares, in the order a reader meets them (``app.py``)."""
COMPOSED = (
    "infra.jobs_control.JobsControl",
    "infra.tasks_api.TasksApi",
    "infra.monitoring.Monitoring",
)
"""What ``VigilStack`` composes from them: documented too, for a stack of one's own."""
SKIPPED_PARAMETERS = ("self", "scope", "construct_id")
"""Every construct's first three (CDK's own): said once on the page, not per construct."""
CONTEXT_SUFFIX = "_CONTEXT"


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: str
    default: str
    meaning: str


def lookup(path: str) -> griffe.Class:
    """The class ``path`` names: where it is written, when ``path`` is a re-export (the import
    path users write, ``infra.observer_fleet.ObserverFleet``, is a package's)."""
    module_path, name = path.rsplit(".", 1)
    found = source.module(module_path)[name]
    if isinstance(found, griffe.Alias):
        found = found.final_target
    assert isinstance(found, griffe.Class), path
    return found


def parameters(path: str) -> list[Parameter]:
    """The construct's ``__init__`` parameters (a dataclass's: its fields, griffe reads the
    ``__init__`` dataclasses generate), with their meaning: the docstring's ``Args:`` entry, else
    the field's own docstring."""
    cls = lookup(path)
    documented = source.documented_parameters(cls)
    init = cls.members["__init__"]
    assert isinstance(init, griffe.Function), path
    documented |= source.documented_parameters(init)
    fields = {
        name: source.docstring(member)
        for name, member in cls.members.items()
        if isinstance(member, griffe.Attribute)
    }
    return [
        Parameter(
            param.name,
            str(param.annotation or ""),
            _default(cls, param.default),
            documented.get(param.name, "") or fields.get(param.name, ""),
        )
        for param in init.parameters
        if param.name not in SKIPPED_PARAMETERS
        and param.kind is not griffe.ParameterKind.var_keyword
    ]


def _default(cls: griffe.Class, default: object) -> str:
    """A default as written, and a named constant's value beside its name."""
    if default is None:
        return ""
    written = str(default)
    if not written.isidentifier() or written in ("None", "True", "False"):
        return written
    source.module("vigil.contract")  # where infra's shared constants live
    try:
        constant = cls.module[written].final_target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return written
    value = getattr(constant, "value", None)
    return f"{written} = {value}" if value is not None else written


def context_keys() -> list[tuple[str, str, str]]:
    """``(key, constant, meaning)`` of every ``*_CONTEXT`` constant in ``infra`` and its
    packages (``infra.observer_fleet``)."""
    found = []
    for module in sorted(_modules(source.module("infra")), key=lambda m: m.path):
        for name, member in module.members.items():
            if (
                name.endswith(CONTEXT_SUFFIX)
                and isinstance(member, griffe.Attribute)
                and member.value is not None
            ):
                found.append(
                    (str(member.value).strip("'\""), member.path, source.docstring(member))
                )
    return sorted(found)


def _modules(package: griffe.Module) -> list[griffe.Module]:
    """Every module of a package, its packages' modules too."""
    found = []
    for module in package.modules.values():
        found.append(module)
        found += _modules(module)
    return found


def parameter_anchor(construct: str, parameter: str) -> str:
    """``observerfleet-heartbeat_interval``: the id of one parameter's row on the page."""
    return anchor(construct, parameter)


def render() -> str:
    return page(
        "Constructs",
        "The CDK constructs a Vigil app declares (`app.py`), then the ones `VigilStack` composes "
        "from them, and the context a deploy takes (`cdk deploy -c KEY=VALUE`). Every construct "
        "takes CDK's `scope` and `construct_id` first; the rest are keyword arguments. "
        "Durations are `aws_cdk.Duration`s.",
        "## Declared by an app\n",
        *(_construct(path) for path in CONSTRUCTS),
        "## Composed by VigilStack\n",
        *(_construct(path) for path in COMPOSED),
        _context(),
        _quotas(),
    )


def _construct(path: str) -> str:
    cls = lookup(path)
    text = f"{heading(3, cls.name, anchor(cls.name))}\n{code(path)}\n\n{prose(source.summary(cls))}\n\n"
    rows = [
        (
            target(parameter_anchor(cls.name, p.name)) + code(p.name),
            code(p.annotation),
            code(p.default) or "required",
            prose(p.meaning),
        )
        for p in parameters(path)
    ]
    return text + table(("Parameter", "Type", "Default", "Meaning"), rows)


def _context() -> str:
    rows = [
        (target(anchor("context", key)) + code(key), code(constant), prose(meaning))
        for key, constant, meaning in context_keys()
    ]
    return "## CDK context\n\n" + table(("Key", "Read by", "Meaning"), rows)


def _quotas() -> str:
    """``infra.quotas``: what ``check_assembly`` holds every synth to (no CDK import)."""
    from infra.quotas import QUOTAS

    rows = [(f"{quota.limit:,}", prose(quota.what), f"[AWS]({quota.source})") for quota in QUOTAS]
    return (
        heading(2, "Quotas checked at synth", "quotas")
        + "\n"
        + prose(
            "A synth (`cdk synth`, `cdk deploy`, the emulator's) fails with an error naming the "
            "quota and the construct when the cloud assembly would pass one of these at deploy; "
            "values CloudFormation fills in (a queue's URL, a role's ARN) are counted at their "
            "longest (`infra.quotas`)."
        )
        + "\n\n"
        + table(("Limit", "Of", "Source"), rows)
    )

"""The generated reference, rendered in process (no MkDocs build), against the code's own lists:
every construct parameter with a meaning, every API route, every CLI command and argument, every
metric and alarm, the testing kit's exports; and the runbooks against the contract's alarms."""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from docsgen import alarms, api, cli, constructs, kit, runbooks, source
from docsgen.markdown import anchor, code, heading, target
from docsgen.pages import PAGES
from vigil.contract.alarms import ALARMS, RUNBOOKS, Alarm, AlarmSpec
from vigil.contract.metrics import JobMetric, ObserverMetric, TaskMetric

ROOT = Path(__file__).resolve().parents[2]


@cache
def rendered(path: str) -> str:
    return PAGES[path]()


def _source_parameters(path: str) -> list[str]:
    """The construct's parameters as ``ast`` reads its source (independently of griffe): its
    ``__init__``'s keyword-only ones, or a dataclass's annotated fields."""
    module, name = path.rsplit(".", 1)
    tree = _defining_module(module, name)
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            return [a.arg for a in [*args.args, *args.kwonlyargs]][3:]
    return [
        node.target.id
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    ]


def _defining_module(module: str, name: str) -> ast.Module:
    """The source that defines ``name``: ``module``'s own, or, when ``module`` is a package that
    re-exports it (``from infra.observer_fleet.fleet import ObserverFleet``), the module it names."""
    file = ROOT / (module.replace(".", "/") + ".py")
    if not file.exists():
        file = ROOT / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(file.read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and name in {alias.name for alias in node.names}
        ):
            return _defining_module(node.module, name)
    return tree


@pytest.mark.parametrize("path", constructs.CONSTRUCTS + constructs.COMPOSED)
def test_every_construct_parameter_is_listed_with_its_meaning(path: str) -> None:
    page = rendered("reference/constructs.md")
    documented = {parameter.name: parameter for parameter in constructs.parameters(path)}

    assert list(documented) == _source_parameters(path)
    construct = path.rsplit(".", 1)[1]
    section = page.split(heading(3, construct, anchor(construct)), 1)[1].split("\n### ", 1)[0]
    for name, parameter in documented.items():
        # Its row carries the id the guides link to (constructs.md#observerfleet-kinds).
        assert f"| {target(constructs.parameter_anchor(construct, name))}`{name}` |" in section
        assert parameter.meaning.strip(), f"{path}: {name} has no docstring text (Args: section)"


def test_every_cdk_context_key_infra_reads_is_listed_with_its_meaning() -> None:
    page = rendered("reference/constructs.md")
    read = set(re.findall(r"try_get_context\((\w+_CONTEXT)\)", _infra_source()))
    listed = {
        constant.rsplit(".", 1)[1]: meaning for _, constant, meaning in constructs.context_keys()
    }

    assert read <= set(listed)
    for key, _, meaning in constructs.context_keys():
        assert f"| {target(anchor('context', key))}`{key}` |" in page and meaning.strip(), key


def _infra_source() -> str:
    return "\n".join(path.read_text() for path in sorted((ROOT / "infra").rglob("*.py")))


@pytest.mark.parametrize("resolver", api.RESOLVERS, ids=lambda r: r.title)
def test_every_api_route_is_listed_with_its_responses(resolver: api.Resolver) -> None:
    page = rendered("reference/api.md")
    app = resolver.build()
    routes = {
        (route.method.upper(), route.openapi_path)
        for route in app._static_routes + app._dynamic_routes
        if route.include_in_schema
    }

    assert routes == set(api.operations(api.schema(resolver)))
    for method, path in routes:
        title = heading(3, code(f"{method} {path}"), anchor(method, path))
        section = page.split(title, 1)[1].split("\n### ", 1)[0]
        assert "| Response |" in section and "`422`" in section, (method, path)


def test_every_cli_command_and_argument_is_listed() -> None:
    page = rendered("reference/cli.md")
    found = cli.commands()

    assert {command.words[:1] for command in found if command.words} == {
        ("jobs",),
        ("tasks",),
        ("local",),
        ("observers",),
        ("hosts",),
        ("upgrade",),
    }
    for command in found:
        title = heading(
            2, code(" ".join(("vigil", *command.words))), anchor("vigil", *command.words)
        )
        assert title in page, title
        section = page.split(title, 1)[1].split("\n## ", 1)[0]
        assert command.help or not command.words, f"{title}: no help text"
        for action in cli.arguments(command):
            shown = action.option_strings[0] if action.option_strings else action.dest
            assert f"`{shown}" in section, (title, shown)
            assert action.help, f"{title}: {shown} has no help text"


def test_every_metric_and_alarm_is_listed_with_its_meaning() -> None:
    page = rendered("reference/metrics-and-alarms.md")

    for enum in (JobMetric, TaskMetric, ObserverMetric):
        for metric in enum:
            row = next(
                line
                for line in page.splitlines()
                if line.startswith(f"| {target(anchor('metric', metric.value))}`{metric.value}` |")
            )
            assert not row.endswith("|   |"), f"{metric!r} has no docstring in the contract"
    assert set(alarms.metric_names()) == {
        m.value for e in (JobMetric, TaskMetric, ObserverMetric) for m in e
    }
    for alarm in Alarm:
        assert f"[`{alarm.value}`](../runbooks.md#{alarm.value})" in page
    assert set(ALARMS) == set(Alarm)


def test_the_testing_kit_lists_every_export_and_fixture() -> None:
    page = rendered("reference/testing-kit.md")
    tree = ast.parse((ROOT / "vigil_tools/testing/__init__.py").read_text())
    (exports,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"
    ]

    assert kit.public_names() == sorted(exports)
    for name in exports:
        assert heading(3, name, anchor(name)) in page
    assert heading(3, code("vigil_stack"), anchor("vigil_stack")) in page
    for name in exports:
        cls = source.module(kit.PACKAGE)[name].final_target
        assert source.docstring(cls), name
        for member in kit.public_members(cls):
            assert not member.is_function or source.docstring(member), f"{name}.{member.name}"


def test_every_alarm_has_one_runbook_entry_in_the_contracts_order() -> None:
    assert runbooks.check() == [alarm.value for alarm in ALARMS]


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda text: text.replace("## job-uncertain\n", "## job-unsure\n"), "job-uncertain"),
        (lambda text: text + "\n## no-such-alarm\n", "naming no alarm: no-such-alarm"),
        (
            lambda text: (
                text.replace("## job-failed-runs\n", "## x\n")
                .replace("## job-undelivered\n", "## job-failed-runs\n")
                .replace("## x\n", "## job-undelivered\n")
            ),
            "order",
        ),
    ],
    ids=["missing", "extra", "order"],
)
def test_runbooks_out_of_step_with_the_alarms_are_refused(
    change: Callable[[str], str], complaint: str
) -> None:
    text = (ROOT / RUNBOOKS).read_text()

    with pytest.raises(runbooks.RunbooksOutOfStep, match=complaint):
        runbooks.check(change(text))


def test_every_command_the_runbooks_say_to_type_parses() -> None:
    """``vigil ...`` in a runbook entry is what an operator types at 3 a.m.: it must exist."""
    text = (ROOT / RUNBOOKS).read_text()
    typed = re.findall(r"`(vigil [^`]*)`", text)
    values = {"NAME": "cleanup", "TICK": "2026-11-22T12:00:00+00:00", "ID": "a1", "EFFECT": "mail"}

    assert len(typed) > 30
    for command in typed:
        words = [values.get(word, word) for word in shlex.split(command)]
        cli.parser().parse_args(words[1:])  # raises on an unknown command or argument


def test_a_new_alarm_without_an_entry_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    added = dict(ALARMS)
    added["brand-new"] = AlarmSpec(  # type: ignore[index]
        ALARMS[Alarm.API_5XX].scope, "x", "Sum", 5, "new"
    )
    monkeypatch.setattr(runbooks, "ALARMS", added)

    with pytest.raises(runbooks.RunbooksOutOfStep, match="no entry for the alarms brand-new"):
        runbooks.check()


def test_the_pages_are_deterministic() -> None:
    for path, render in PAGES.items():
        assert render() == rendered(path), path

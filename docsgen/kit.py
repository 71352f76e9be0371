"""``reference/testing-kit.md``: the testing kit's public API (``vigil_tools.testing.__all__``
and the pytest fixtures its plugin registers), from its docstrings, read statically."""

from __future__ import annotations

import griffe

from docsgen import source
from docsgen.markdown import anchor, code, heading, page, prose, table

PACKAGE = "vigil_tools.testing"
PLUGIN = "vigil_tools.testing.plugin"


def public_names() -> list[str]:
    """What the kit exports: its ``__all__``."""
    exports = source.module(PACKAGE).exports
    return sorted(str(name) for name in exports or ())


def fixtures() -> list[griffe.Function]:
    """The plugin's public pytest fixtures."""
    plugin = source.module(PLUGIN)
    return [
        member
        for name, member in sorted(plugin.members.items())
        if isinstance(member, griffe.Function)
        and not name.startswith("_")
        and any("fixture" in str(decorator.value) for decorator in member.decorators)
    ]


def public_members(cls: griffe.Class) -> list[griffe.Object | griffe.Alias]:
    """Its public methods and properties, in source order (``__init__`` excluded)."""
    return [
        member
        for name, member in cls.members.items()
        if not name.startswith("_") and (member.is_function or member.is_attribute)
    ]


def render() -> str:
    package = source.module(PACKAGE)
    return page(
        "Testing kit",
        prose(source.docstring(package)),
        "## Fixtures\n",
        *(
            f"{heading(3, code(fixture.name), anchor(fixture.name))}\n"
            f"{prose(source.docstring(fixture))}\n"
            for fixture in fixtures()
        ),
        "## Classes\n",
        *(_class(name) for name in public_names()),
    )


def _class(name: str) -> str:
    target = source.module(PACKAGE)[name].final_target
    assert isinstance(target, griffe.Class), name
    text = f"{heading(3, name, anchor(name))}\n{code(target.path)}\n\n{prose(source.docstring(target))}\n\n"
    members = public_members(target)
    attributes = [
        (code(member.name), code(str(getattr(member, "annotation", None) or "")), _one(member))
        for member in members
        if not member.is_function
    ]
    if attributes:
        text += table(("Attribute", "Type", "Meaning"), attributes) + "\n"
    for member in members:
        if member.is_function:
            assert isinstance(member, (griffe.Function, griffe.Alias))
            text += _function(member, level=4)
    return text


def _one(member: griffe.Object | griffe.Alias) -> str:
    return prose(source.docstring(member))


def _function(function: griffe.Function | griffe.Alias, level: int) -> str:
    params = ", ".join(_parameter(param) for param in function.parameters if param.name != "self")
    returns = f" -> {function.returns}" if function.returns else ""
    heading = "#" * level
    return (
        f"{heading} `{function.name}({params}){returns}`\n\n"
        f"{prose(source.docstring(function)) or ''}\n\n"
    )


def _parameter(param: griffe.Parameter) -> str:
    text = param.name
    if param.kind is griffe.ParameterKind.var_positional:
        text = f"*{text}"
    elif param.kind is griffe.ParameterKind.var_keyword:
        text = f"**{text}"
    if param.annotation:
        text += f": {param.annotation}"
    if param.default is not None:
        text += f" = {param.default}"
    return text

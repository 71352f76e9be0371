"""``reference/tasks-library.md``: what an application calls in ``vigil.tasks`` (enqueue, read,
wait, cancel, and what they raise), from the docstrings, read statically."""

from __future__ import annotations

import griffe

from docsgen import source
from docsgen.kit import _function, public_members
from docsgen.markdown import anchor, code, heading, page, prose

PACKAGE = "vigil.tasks"
FUNCTIONS = {
    "enqueue": "vigil.tasks.enqueue",
    "get": "vigil.tasks.enqueue",
    "wait": "vigil.tasks.enqueue",
    "cancel": "vigil.tasks.enqueue",
    "task": "vigil.tasks.decorator",
}
"""The application's calls in the order it makes them, then the task author's decorator, each
from its module (the package's ``enqueue`` is both a module and a function: griffe answers the
module)."""
CLASSES = {
    "TaskHandle": "vigil.tasks.waiting",
    "TaskFailed": "vigil.tasks.waiting",
    "PollBackoff": "vigil.tasks.waiting",
    "Reject": "vigil.tasks.errors",
    "KeyReused": "vigil.tasks.errors",
    "InvalidTask": "vigil.tasks.errors",
}


def render() -> str:
    package = source.module(PACKAGE)
    return page(
        "Tasks library",
        prose(source.docstring(package)),
        "## Functions\n",
        *(_function(_target(name, where), level=3) for name, where in FUNCTIONS.items()),
        "## Classes\n",
        *(_class(name, where) for name, where in CLASSES.items()),
    )


def _target(name: str, where: str) -> griffe.Function:
    target = source.module(where)[name]
    assert isinstance(target, griffe.Function), name
    return target


def _class(name: str, where: str) -> str:
    target = source.module(where)[name]
    assert isinstance(target, griffe.Class), name
    text = f"{heading(3, name, anchor(name))}\n{code(target.path)}\n\n"
    text += f"{prose(source.docstring(target))}\n\n"
    for member in public_members(target):
        if member.is_function:
            assert isinstance(member, griffe.Function | griffe.Alias)
            text += _function(member, level=4)
    return text

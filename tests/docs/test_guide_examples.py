"""The guides' Python examples run: every code block marked ``<!-- example: kit -->`` in
``docs/guides/*.md`` is executed against the deployed example app on the testing kit, with
``vigil.tasks``' default client bound to it (a wait's sleep advances the kit's clock, so the
tasks run). An example that stops working fails here, not in a reader's hands. (Each block about
1 to 3 s: the kit's stack, one per test.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

GUIDES = Path(__file__).resolve().parents[2] / "docs" / "guides"
MARKED = re.compile(r"<!-- example: kit -->\s*```python\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(GUIDES.glob("*.md")):
        for index, block in enumerate(MARKED.findall(page.read_text()), start=1):
            found.append((f"{page.name}#{index}", block))
    return found


def test_the_guides_mark_their_runnable_examples() -> None:
    pages = {name.split("#")[0] for name, _ in examples()}
    assert "tasks.md" in pages


@pytest.mark.parametrize(("where", "code"), examples(), ids=[name for name, _ in examples()])
def test_a_guides_example_runs_against_the_kit(
    where: str, code: str, vigil_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    # (the module, not ``vigil.tasks.enqueue`` the function the package exports under its name)
    enqueueing = importlib.import_module("vigil.tasks.enqueue")
    monkeypatch.setattr(enqueueing, "default_client", lambda: vigil_stack.task_client)
    exec(compile(code, where, "exec"), {"__name__": where})

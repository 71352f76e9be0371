"""``vigil local up``'s live view clears the screen on every refresh: the ``export`` lines are drawn
again at its top, so they stay on screen to be copied."""

from __future__ import annotations

import io
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vigil_tools.local import view
from vigil_tools.local.up import _Running, exports, pointer_lines
from vigil_tools.local.view import CLEAR

URL = "http://127.0.0.1:4580"


class Clock:
    def __call__(self) -> datetime:
        return datetime(2026, 11, 23, 6, 0, tzinfo=UTC)

    def elapsed(self) -> float:
        return 60.0  # a refresh is due


class Stub:
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def test_the_export_lines_stay_on_screen_after_a_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "render", lambda *_: "JOBS AND OBSERVERS")
    stop = threading.Event()
    out = io.StringIO()
    env = exports(URL, URL + "/vigil-api")
    running = _Running(
        session=None,
        live=Stub(tick=lambda: None),
        containers=Stub(sync=stop.set),  # one round of the loop
        fleet=Stub(registry_table="registry"),
        catalog=None,
        clock=Clock(),
        endpoint=Stub(url=URL),
        speed=1.0,
        out=out,
        pointers=pointer_lines(env),
    )

    running.loop(stop, quiet=False)

    refreshed = out.getvalue().split(CLEAR)[-1].splitlines()
    assert [line for line in refreshed if line.startswith("export ")] == [
        f"export {name}={value}" for name, value in env.items()
    ]
    assert f"aws --endpoint-url {URL} sqs list-queues" in refreshed
    assert refreshed[-1] == "JOBS AND OBSERVERS"


def test_the_readme_shows_the_lines_local_up_prints() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    env = exports("http://127.0.0.1:4580", "http://127.0.0.1:4580/vigil-api")

    printed = "\n".join(pointer_lines(env))

    assert f"```bash\n{printed}\n```" in readme

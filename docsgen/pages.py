"""The generated pages: their path under ``docs/`` and the function that renders each."""

from __future__ import annotations

from collections.abc import Callable

from docsgen import alarms, api, cli, constructs, kit, tasks_library

PAGES: dict[str, Callable[[], str]] = {
    "reference/constructs.md": constructs.render,
    "reference/api.md": api.render,
    "reference/cli.md": cli.render,
    "reference/metrics-and-alarms.md": alarms.render,
    "reference/testing-kit.md": kit.render,
    "reference/tasks-library.md": tasks_library.render,
}

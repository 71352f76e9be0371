"""Where the Vigil project is, for the tools that synthesize its CDK app.

The installed distribution holds the runtime library and these tools, not the app: ``app.py``, the
constructs (``infra/``) and the team's jobs and observers (``functions/``) live in a checkout. A
tool that synthesizes (the demo, the emulator) finds that checkout, in this order:

1. an explicit path (``--project``);
2. ``$VIGIL_PROJECT``;
3. the nearest folder at or above the working directory holding ``cdk.json`` and ``app.py``;
4. the checkout these tools were imported from (a source tree or an editable install).

An explicit path or ``$VIGIL_PROJECT`` that is not a project is an error, never skipped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_ENV = "VIGIL_PROJECT"
MARKERS = ("cdk.json", "app.py")


class ProjectNotFound(Exception):
    """No Vigil project where the tool looked; the message says where and how to point at one."""


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def functions(self) -> Path:
        """The Lambda asset root: the import root of the runtime library, jobs and observers."""
        return self.root / "functions"

    def importable(self) -> None:
        """Put the app (``app``, ``infra``) and its functions on ``sys.path``, ahead of the rest."""
        for folder in (self.functions, self.root):
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))


def find_project(
    explicit: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Project:
    env = os.environ if environ is None else environ
    for given, origin in ((explicit, "--project"), (env.get(PROJECT_ENV), f"${PROJECT_ENV}")):
        if given:
            root = Path(given).expanduser().resolve()
            if not _is_project(root):
                raise ProjectNotFound(f"{origin} {root} is not a Vigil project: {_needs()}")
            return Project(root)
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents, Path(__file__).resolve().parent.parent):
        if _is_project(folder):
            return Project(folder)
    raise ProjectNotFound(
        f"no Vigil project at or above {start}: {_needs()}. Run from the checkout, "
        f"or pass --project DIR or set {PROJECT_ENV}."
    )


def _is_project(folder: Path) -> bool:
    return all((folder / marker).is_file() for marker in MARKERS)


def _needs() -> str:
    return f"a project folder holds {' and '.join(MARKERS)}"

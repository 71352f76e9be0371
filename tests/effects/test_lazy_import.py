"""A job, task or observer that does not write through ``run.fenced`` pays nothing for it."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_decorators_and_the_observer_runtime_do_not_import_the_effects() -> None:
    probe = (
        "import sys; import vigil.jobs, vigil.jobs.decorator, vigil.tasks.decorator, "
        "vigil.observers.runtime, jobs.cleanup; "
        "print(sorted(m for m in sys.modules if m.startswith(('vigil.effects', "
        "'vigil.contract.effects'))))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=os.environ
    )
    assert shown.stdout.strip() == "[]"

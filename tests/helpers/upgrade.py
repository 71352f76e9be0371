"""The app as deployments before the registry was keyed by kind have it: main's synth at
db5f9af (its template and asset manifest, kept in ``tests/upgrade/name_keyed``), for the tests
that deploy it on the emulator and then deploy today's app over it.

Only the template is that version's: the emulator runs every function and container in-process
from this checkout's ``functions/``, with the environment that template gives it (the old
registry's variable, ``VIGIL_OBSERVERS_TABLE``, which the code reads as a registry keyed by name:
:mod:`vigil.observers.registry.layout`). So the old generation's containers here are this code
working as that version did on that table, not that version's code itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from vigil_tools.emulator.template import Synthesized

NAME_KEYED = Path(__file__).resolve().parents[1] / "upgrade" / "name_keyed"
NAME_KEYED_COMMIT = "db5f9af5a433d99c3d5267eb702c6a9097b09a8a"


def name_keyed_app(folder: Path) -> Synthesized:
    """That version's cloud assembly in ``folder``: the template, the manifest, and a stand-in for
    each file asset (the emulator uploads it; nothing runs it)."""
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(NAME_KEYED / "Vigil.template.json.gz", "rt") as packed:
        template = json.load(packed)
    assets = json.loads((NAME_KEYED / "Vigil.assets.json").read_text())
    (folder / "Vigil.template.json").write_text(json.dumps(template))
    for asset in assets["files"].values():
        source = folder / asset["source"]["path"]
        if asset["source"].get("packaging") == "zip" and not source.exists():
            source.mkdir()
            (source / "README").write_text(f"functions/ of {NAME_KEYED_COMMIT} (not run)\n")
    return Synthesized(outdir=folder, template=template, assets=assets)

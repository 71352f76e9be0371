"""Vigil's CDK constructs: one per capability, composed by ``VigilStack``. They run from the
checkout and are not installed.

They import the names they share with the runtime from ``vigil.contract`` (standard library only,
under ``functions/``), so importing infra puts ``functions/`` on the path: ``python app.py`` and
``cdk synth`` then work without the Makefile's PYTHONPATH.
"""

import sys
from pathlib import Path

_FUNCTIONS = str(Path(__file__).resolve().parent.parent / "functions")
if _FUNCTIONS not in sys.path:
    sys.path.insert(0, _FUNCTIONS)

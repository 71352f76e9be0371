"""The observer image: a base pinned by digest, and exactly the runtime lock the suite runs.

``functions/requirements.txt`` is the one lock: the image installs it with ``--no-deps``, the
suite's virtualenv installs it (``requirements.txt`` includes it), and the Lambda layer is chosen by
its Powertools version. A lock that misses a dependency, or that the suite does not run, fails here.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution

from packaging.requirements import Requirement

from infra.function import FUNCTIONS_DIR
from infra.pins import pinned_versions
from vigil_tools.emulator.template import Synthesized

DOCKERFILE = FUNCTIONS_DIR / "observers" / "Dockerfile"
LOCK = FUNCTIONS_DIR / "requirements.txt"
LINUX_312 = {
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def test_every_base_image_is_pinned_by_digest() -> None:
    bases = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), flags=re.M)
    assert bases
    for base in bases:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), f"{base} floats"


def test_the_image_installs_the_lock_and_nothing_else(synthesized: Synthesized) -> None:
    dockerfile = DOCKERFILE.read_text()
    assert "COPY requirements.txt /tmp/requirements.txt" in dockerfile
    (install,) = re.findall(r"pip install[^&]*", dockerfile)
    assert "--no-deps -r /tmp/requirements.txt" in install
    assert "pip check" in dockerfile
    assert not re.search(r"==\s*\d", dockerfile), "versions come from the lock only"
    for image in synthesized.assets["dockerImages"].values():
        assert "dockerBuildArgs" not in image["source"]


def locked() -> dict[str, tuple[str, set[str]]]:
    """Package -> (version, extras), from the lock's lines."""
    found = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            found[_key(requirement.name)] = (spec.version, set(requirement.extras))
    return found


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lock_is_closed_under_dependencies_and_is_what_the_suite_runs() -> None:
    lock = locked()
    assert {"boto3", "aws-lambda-powertools", "botocore", "urllib3"} <= set(lock)
    missing = []
    for name, (version, extras) in lock.items():
        try:
            installed = distribution(name)
        except PackageNotFoundError:
            missing.append(f"{name} is not installed")
            continue
        assert installed.version == version, f"{name}: the suite runs {installed.version}"
        for line in installed.requires or []:
            needed = Requirement(line)
            applies = needed.marker is None or any(
                needed.marker.evaluate({**LINUX_312, "extra": extra}) for extra in ["", *extras]
            )
            if applies and _key(needed.name) not in lock:
                missing.append(f"{name} needs {needed.name}")
    assert missing == []
    # infra reads its pins (the Powertools layer) through requirements.txt, which includes the lock
    assert pinned_versions()["aws-lambda-powertools"] == lock["aws-lambda-powertools"][0]

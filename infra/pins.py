"""The versions ``requirements.txt`` pins (with the runtime lock it includes,
``functions/requirements.txt``), read at synth so what AWS runs cannot drift from them.

The tests run the pinned Powertools, so the Lambda layer is chosen by that same version (through the
SSM parameter Powertools publishes for each release) and the observer image is built with the same
pins. A version written by hand anywhere else would be a second source that could disagree.
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


class PinError(ValueError):
    """requirements.txt does not pin a package that infra needs an exact version of."""


def pinned_versions(path: Path = REQUIREMENTS) -> dict[str, str]:
    """Package name (normalized, lower case) -> exact version, for every ``name==version`` line,
    those of the files it includes (``-r``) too."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            pins.update(pinned_versions(path.parent / line.split(maxsplit=1)[1]))
            continue
        if not line or line.startswith("-"):
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            raise PinError(f"{path.name}:{number}: {error}") from None
        exact = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        if exact:
            pins[requirement.name.lower().replace("_", "-")] = exact[0]
    return pins


def pinned(package: str, path: Path = REQUIREMENTS) -> str:
    """The exact version ``requirements.txt`` pins for ``package``; raises PinError if it does not."""
    version = pinned_versions(path).get(package.lower().replace("_", "-"))
    if version is None:
        raise PinError(f"{path.name} must pin {package} with '==' (infra builds from that version)")
    return version

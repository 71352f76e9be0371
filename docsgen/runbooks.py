"""The runbooks page's entries against the contract's alarms: one ``## <identity>`` section per
``Alarm``, in the contract's order, and nothing else (the entries are written by hand in
``docs/runbooks.md``; this only checks them)."""

from __future__ import annotations

import re
from pathlib import Path

from vigil.contract.alarms import ALARMS, RUNBOOKS

ROOT = Path(__file__).resolve().parent.parent
ENTRY = re.compile(r"^## (\S+)\s*$", re.MULTILINE)


class RunbooksOutOfStep(Exception):
    """An alarm without an entry, an entry naming no alarm, or entries out of order."""


def entries(text: str) -> list[str]:
    """The identities the page has an entry for, in its order."""
    return ENTRY.findall(text)


def check(text: str | None = None) -> list[str]:
    """The page's entries when they are exactly the contract's alarms, in order; else raises
    naming what is missing, what is extra, or that the order differs."""
    found = entries(text if text is not None else (ROOT / RUNBOOKS).read_text())
    wanted = [str(alarm) for alarm in ALARMS]
    missing = [name for name in wanted if name not in found]
    extra = [name for name in found if name not in wanted]
    problems = []
    if missing:
        problems.append(f"no entry for the alarms {', '.join(missing)}")
    if extra:
        problems.append(f"entries naming no alarm: {', '.join(extra)}")
    if not problems and found != wanted:
        problems.append("entries not in the contract's order (vigil.contract.alarms.ALARMS)")
    if problems:
        raise RunbooksOutOfStep(f"{RUNBOOKS}: " + "; ".join(problems))
    return found

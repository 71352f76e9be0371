"""The deploying guide's list of the stack's outputs is the synthesized template's: one left out
(the tasks table's, the API endpoints by name) is a reader who cannot wire an application. (Reads
the shared synthesized app: well under a second.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploying.md"
ROW = re.compile(r"^\| `([A-Za-z0-9]+)` \|", re.MULTILINE)


def listed_outputs() -> list[str]:
    text = GUIDE.read_text()
    start = text.index("<!-- outputs:start -->")
    return ROW.findall(text[start : text.index("<!-- outputs:end -->")])


def test_the_guide_lists_every_output_of_the_stack_and_no_other(synthesized: Any) -> None:
    assert sorted(listed_outputs()) == sorted(synthesized.template["Outputs"])

"""The author's traceback, without the emulator's and the runtime's frames above it.

A job's exception travels up through the guard, the decorator and the local Lambda runtime; the
frames a job author can act on are their own (and what they called). These helpers cut the
traceback at the first frame outside ``vigil``, ``vigil_tools``, the standard library and the
installed packages (Powertools' decorators).
"""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path
from types import TracebackType

import vigil
import vigil_tools

_FRAMEWORK = tuple(
    [str(Path(p.__file__ or "").parent) for p in (vigil, vigil_tools)]
    + [sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")]
)


def _framework(filename: str) -> bool:
    return filename.startswith(_FRAMEWORK)


def author_frames(error: BaseException) -> TracebackType | None:
    """The traceback from the first frame that is not Vigil's own (all of it if none is)."""
    tb = error.__traceback__
    first = tb
    while tb is not None and _framework(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb or first


def format_author(error: BaseException) -> str:
    """The exception as Python prints it, from the author's first frame."""
    lines = traceback.format_exception(type(error), error, author_frames(error))
    return "".join(lines).rstrip()


def reraise(error: BaseException) -> None:
    """Raise ``error`` again with the author's frames only (pytest then shows the author's code)."""
    __tracebackhide__ = True
    raise error.with_traceback(author_frames(error))

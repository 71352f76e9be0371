"""How a child's end reads in its ``HOST_EXIT`` report: a pure function of its exit status.

The runtime's own codes (0 clean, 1 crash, 2 bad configuration, 3 fenced) pass through; anything
else (``os._exit(7)``, a signal such as SIGSEGV, the host's SIGKILL after the stop timeout) is a
CRASH whose reason says what happened, so the reconciler applies its backoff and FAILED rules.
"""

from __future__ import annotations

import signal

from vigil.contract.observers import ExitCode

STATUS_LOST = 256
"""A child's exit status when nobody could read it (the forkserver, its parent, died while it ran):
no process can exit with it (statuses are 0-255, signals negative)."""
_MEANING = {
    ExitCode.CLEAN: "exited cleanly",
    ExitCode.CRASH: "the observer's code raised",
    ExitCode.BAD_CONFIGURATION: "bad configuration",
    ExitCode.FENCED: "fenced",
}


def describe_exit(
    exitcode: int, *, asked_to_stop: str | None = None, killed_after_s: float | None = None
) -> tuple[ExitCode, str]:
    """``exitcode`` as multiprocessing gives it (negative: killed by that signal);
    ``asked_to_stop``: why the host told the child to stop, if it did; ``killed_after_s``: the
    host killed it after waiting that long for it to stop."""
    if exitcode == STATUS_LOST:
        code, reason = ExitCode.CRASH, "ended; its exit status was lost with the host's forkserver"
    elif exitcode < 0:
        code, reason = ExitCode.CRASH, f"killed by signal {_signal_name(-exitcode)}"
        if killed_after_s is not None:
            reason += f" after ignoring the stop request for {killed_after_s:g} s"
    elif exitcode in _MEANING:
        code = ExitCode(exitcode)
        reason = _MEANING[code]
    else:
        code, reason = ExitCode.CRASH, f"exited with code {exitcode}"
    if asked_to_stop:
        reason += f" (asked to stop: {asked_to_stop})"
    return code, reason


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)

"""``run.once``'s names on a run's record, read by the guards, the journal, the CLI and the kit.

Apart from :mod:`vigil.contract.effects` so a run that journals nothing imports nothing of it.
"""

from __future__ import annotations

from enum import StrEnum

JOURNAL_ATTRIBUTE = "effects"
"""``run.once``'s journal, a map on the run's own record (a job's tick, a task): effect name ->
``{state, fence, at}``. Every claim creates it empty if absent (``if_not_exists``, no request of its
own), so the first intent's ``SET effects.<name>`` has a parent map to write into."""
UNCERTAIN_EFFECT_ATTRIBUTE = "uncertain_effect"
"""On a record ended UNCERTAIN: the effect whose intent was found without its completion."""


class EffectState(StrEnum):
    INTENT = "INTENT"
    """Recorded before the effect: a run is about to do it (or did, and died before DONE)."""
    DONE = "DONE"


class Verdict(StrEnum):
    """A person's word on an effect a run stopped UNCERTAIN on: the one vocabulary of ``vigil jobs
    settle``, ``vigil tasks settle``, ``vigil observers settle`` (``--done``, ``--done-rerun``,
    ``--not-done``), ``POST /observers/{name}/settle`` (``outcome``) and the testing kit."""

    DONE = "done"
    """It happened: recorded done, and the run ends there (a job's tick or a task SUCCEEDED;
    what followed the effect in the body does not run)."""
    DONE_RERUN = "done_rerun"
    """It happened, and the rest must run: recorded done, and the record left to run again (a
    job's tick or a task FAILED), so the body's rerun skips the effect and does the rest."""
    NOT_DONE = "not_done"
    """It did not happen: the intent cleared, and the record left to run again, effect and all."""

    @property
    def happened(self) -> bool:
        return self is not Verdict.NOT_DONE

    @property
    def reruns(self) -> bool:
        """Whether the body runs again after it (an observer's always does: it restarts)."""
        return self is not Verdict.DONE

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

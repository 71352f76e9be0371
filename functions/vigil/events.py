"""The one error for an event a function cannot act on.

Every function refuses an event of no shape it knows (a job's tick with no scheduled time, a
reconciler event of no known source) before it reads or writes anything, with this error: the
event then fails into its dead-letter queue (or the caller's logs) instead of doing invented work.
"""

from __future__ import annotations


class MalformedEvent(ValueError):
    """The event is none of the shapes the function is wired to receive; nothing was written."""

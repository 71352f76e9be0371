"""Scheduled jobs that run exactly once per tick: the public API for job authors.

from vigil.jobs import scheduled_job

@scheduled_job
def handler(run):
    ...
"""

from vigil.jobs.decorator import scheduled_job
from vigil.jobs.guard import Run

__all__ = ["Run", "scheduled_job"]

"""The jobs' shared names: the runs table's index and the schedule's input."""

from __future__ import annotations

JOBS_INDEX = "jobs-index"
"""The runs table's sparse index (``entity``, ``job``) over the jobs' head items."""
SCHEDULER_INPUT_KEY = "vigil"
"""The key of the object a job's schedule puts in its target input (``{"vigil": {...}}``)."""

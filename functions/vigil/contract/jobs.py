"""The jobs' shared names: the runs table's index and the schedule's input."""

from __future__ import annotations

import re

JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
"""A job's name (``cleanup``): its API path segment, its records' partition, its function's name."""
JOBS_INDEX = "jobs-index"
"""The runs table's sparse index (``entity``, ``job``) over the jobs' head items."""
JOB_PK_PREFIX = "JOB#"
"""The partition of a job's records (``JOB#<job>``); the jobs control's grant is its prefix."""
SCHEDULER_INPUT_KEY = "vigil"
"""The key of the object a job's schedule puts in its target input (``{"vigil": {...}}``)."""
IDEMPOTENCY_PK = "IDEMPOTENCY#jobs-control"
"""Partition of the jobs API's ``Idempotency-Key`` answers in the runs table (Powertools' records,
expired by the table's TTL like the history); the control function may write only there and in
the declared jobs' partitions."""

"""The DynamoDB client settings of the observer containers: a dedicated task (:mod:`.main`), a pooled
host (:mod:`.host_process.entry`) and each of its children. Their own module, so the host process
and the dedicated entry point share them without importing each other.

How long one call can take, by botocore's rules: ``total_max_attempts`` tries (the client setting
``max_attempts`` counts *retries*: 2 means three tries), each up to the connect timeout plus the
read timeout (the read timeout bounds each socket read while the answer is awaited), with standard
mode's backoff between tries (at most 1 s before the second, 2 s before the third, for a
timeout)::

    one call <= attempts x (connect + read) + backoff

That holds while the peer honours the timeouts; a DNS lookup has no timeout, and a peer that
trickles its answer byte by byte keeps a call going longer. So the host never waits on its own
calls (:mod:`.host_process.calls`): these settings only decide how soon a stuck attempt frees its
thread and how often the host can try again within its lease.
"""

from __future__ import annotations

from dataclasses import dataclass

from botocore.config import Config

CONTAINER_ATTEMPTS = 3
"""Tries per call of a dedicated container's and a pooled child's client."""


def client_config(heartbeat_seconds: float) -> Config:
    """Registry calls short enough that a hanging one cannot outlast the self-fence deadline
    (two intervals): botocore's defaults (60 s reads, retried) would hold a heartbeat for minutes.
    At 30 s heartbeats: three tries of 2 s + 5 s and at most 3 s of backoff, 24 s < 60 s."""
    read_timeout = max(1.0, min(5.0, heartbeat_seconds / 3))
    return Config(
        connect_timeout=2,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": CONTAINER_ATTEMPTS},
    )


@dataclass(frozen=True)
class AttemptTimeouts:
    """One attempt's timeouts (seconds)."""

    connect: float
    read: float

    @property
    def attempt(self) -> float:
        """The longest one attempt takes while the peer honours the timeouts."""
        return self.connect + self.read


def host_timeouts(heartbeat_seconds: float) -> AttemptTimeouts:
    """A host's own calls: a read timeout of I/12 (1 to 5 s; 2.5 s at 30 s heartbeats), so an
    attempt stuck on a dead connection gives way to a new one well inside the half interval a
    heartbeat has before the next (at 30 s: a beat has 13 s before its lease's fence)."""
    read = max(1.0, min(5.0, heartbeat_seconds / 12))
    return AttemptTimeouts(connect=min(2.0, read), read=read)


def host_client_config(heartbeat_seconds: float) -> Config:
    """The host's own client (heartbeats and exit reports): ONE attempt per call. Its retries are
    the supervisor's (:func:`vigil.persist.persist` with the deadline its lease leaves), and a
    call the supervisor gave up on should end soon after, not retry on its own."""
    timeouts = host_timeouts(heartbeat_seconds)
    return Config(
        connect_timeout=timeouts.connect,
        read_timeout=timeouts.read,
        retries={"mode": "standard", "total_max_attempts": 1},
    )

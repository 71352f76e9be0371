"""What a pass did (for logs, tests and benchmarks), its metric sink, and per-observer isolation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from vigil.observers import decisions as d
from vigil.observers.model import UnreadableRecord, skipped
from vigil.telemetry import ObserverMetric, logger

MetricSink = Callable[[ObserverMetric, str | None, float], None]
"""Receives (metric, kind or None, value); counts are 1, the pass duration is in milliseconds."""


def no_metrics(metric: ObserverMetric, kind: str | None, value: float) -> None:
    return None


@dataclass
class PassReport:
    observers: int = 0
    described: int = 0
    orphans_stopped: int = 0
    started: int = 0
    stopped: int = 0
    ignored: int = 0
    conflicts: int = 0
    handed_over: int = 0
    """Observers a rollout told to stop so their next generation starts on the new revision."""
    errors: int = 0
    """Observers skipped by a resync after an AWS error of their own (the next pass retries), and
    items skipped because no writer of ours made them (:class:`UnreadableRecord`)."""
    actions: list[tuple[str, d.Action]] = field(default_factory=list)

    def unreadable(self, error: UnreadableRecord) -> None:
        """An item no writer of ours made, skipped: logged and counted (``ReconcilePassErrors``,
        alarmed), every pass until a person removes it."""
        skipped(error)
        self.errors += 1

    def note(self, name: str, action: d.Action) -> None:
        self.actions.append((name, action))
        if isinstance(action, d.StartTask | d.RetryStart):
            self.started += 1
        elif isinstance(action, d.StopTask):
            self.stopped += 1
        elif isinstance(action, d.HandOver):
            self.handed_over += 1
        elif isinstance(action, d.Ignore):
            self.ignored += 1


@contextmanager
def isolated(name: str, report: PassReport) -> Iterator[None]:
    """One observer's AWS error (a throttle, a timeout, a denied call) is logged and counted, and
    the pass goes on with the next observer; the next pass looks at this one again. So does a
    record made unreadable under the pass (a lost write's answer no writer of ours made)."""
    try:
        yield
    except UnreadableRecord as error:
        report.unreadable(error)
    except (ClientError, BotoCoreError) as error:
        report.errors += 1
        logger().warning(
            "observer skipped this pass after an AWS error",
            extra={"observer": name, "error": f"{type(error).__name__}: {error}"},
        )

"""A run's fence, the grants it writes under, and the two errors a fenced write raises.

The order of fences. Each kind of run already has a number that strictly increases when a newer
run takes over from an older one, but only within its own scope:

* a job's tick: the job's fencing token (the job's ``fence``, advanced by every claim of any of its
  ticks: a later claim, of the same tick or another, has a larger token); scope ``job:<job>``;
* a task's attempt: the task record's token (advanced by each claim of that task id); scope
  ``task:<task>/<id>``;
* an observer's generation: its generation number; scope ``observer:<name>``.

A fence is the pair ``(scope, number)`` written as one string, ``"<scope>#<number in 20
digits>"``. Two fences of one scope compare as their numbers (the zero padding makes string order
number order, which is how DynamoDB compares them in a condition); fences of different scopes are
not ordered at all. So a fenced write is refused exactly when the target was last written by a
*newer run of the same scope*; a target written by another scope (another job, another task id) or
by nothing fenced is written over, as it would be without fences: fencing orders the runs of one
job against each other, it does not arbitrate between different writers.

The unit of "once" for deduplicated sends is narrower than the scope for jobs: the tick
(``job:<job>/<tick>``), so a takeover of the same tick repeats its sends under the same ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vigil.contract.effects import FENCE_DIGITS, WRITES_ENV, WriteKind
from vigil.fenced_write import Halt


class Fenced(Exception):
    """A newer run of the same scope wrote the resource (or holds the run's claim): this run's
    write changed nothing.

    ``token`` is this run's fence, ``newer`` the fence (or token) found (None when the record
    that would say is gone)."""

    def __init__(self, resource: str, token: str, newer: str | None) -> None:
        found = f"written by {newer}" if newer is not None else "changed under every attempt"
        super().__init__(f"{resource}: {found}; this run ({token}) was superseded, nothing written")
        self.resource = resource
        self.token = token
        self.newer = newer


class FenceContention(RuntimeError):
    """A conditional write kept losing to concurrent writers that are not newer runs of this
    scope (another job, a person, an unfenced writer): contention, not supersession. It fails
    the run like any error (retried, dead-lettered, alarmed), rather than ending it FENCED."""


class NotGranted(PermissionError):
    """The run was not granted the resource: declare it in ``writes=[...]`` on the construct."""


@dataclass(frozen=True)
class RunFence:
    """Who writes: the scope that orders runs, the run's number in it, and the unit of once."""

    scope: str
    number: int
    unit: str
    """What a repeat of an effect is a repeat of (a job's tick, a task, an observer)."""

    def __post_init__(self) -> None:
        if not 0 <= self.number < 10**FENCE_DIGITS:
            raise ValueError(f"a fence number must have at most {FENCE_DIGITS} digits")

    @classmethod
    def of_job(cls, job: str, tick: str, token: int) -> RunFence:
        return cls(f"job:{job}", token, f"job:{job}/{tick}")

    @classmethod
    def of_task(cls, task: str, task_id: str, token: int) -> RunFence:
        scope = f"task:{task}/{task_id}"
        return cls(scope, token, scope)

    @classmethod
    def of_observer(cls, name: str, generation: int) -> RunFence:
        scope = f"observer:{name}"
        return cls(scope, generation, scope)

    @property
    def prefix(self) -> str:
        return f"{self.scope}#"

    @property
    def value(self) -> str:
        """The fence as written: sortable within the scope."""
        return f"{self.prefix}{self.number:0{FENCE_DIGITS}d}"

    def superseded_by(self, found: object) -> bool:
        """True when ``found`` (a fence read from a resource) is a newer run of this scope."""
        return (
            isinstance(found, str)
            and len(found) == len(self.value)
            and found.startswith(self.prefix)
            and found > self.value
        )


_ONE = {
    WriteKind.TABLES: "table",
    WriteKind.BUCKETS: "bucket",
    WriteKind.QUEUES: "queue",
    WriteKind.BUSES: "bus",
}


@dataclass(frozen=True)
class Grants:
    """What the construct granted, per kind: alias -> physical name (or queue URL)."""

    granted: Mapping[WriteKind, Mapping[str, str]] = field(default_factory=dict)
    who: str = "this run"

    @classmethod
    def from_env(cls, env: Mapping[str, str], who: str) -> Grants:
        raw = env.get(WRITES_ENV, "")
        if not raw:
            return cls({}, who)
        try:
            parsed = json.loads(raw)
            granted = {WriteKind(kind): dict(names) for kind, names in parsed.items()}
        except (ValueError, TypeError, AttributeError) as error:
            raise NotGranted(f"{who}: {WRITES_ENV} is not valid ({error}): redeploy") from None
        return cls(granted, who)

    def resolve(self, kind: WriteKind, name: str) -> str:
        """The physical name (or URL) of a granted resource named by alias, name or URL."""
        names = self.granted.get(kind, {})
        if name in names:
            return names[name]
        for physical in names.values():
            if name == physical or (kind is WriteKind.QUEUES and physical.endswith(f"/{name}")):
                return physical
        listed = ", ".join(sorted(names)) or "none"
        raise NotGranted(
            f"{self.who} was not granted {_ONE[kind]} {name!r} (granted {kind.value}: "
            f"{listed}): add it to writes=[...] on its construct"
        )


class GrantedWriter:
    """What each fenced writer of granted resources holds: the AWS client, the grants' resolver
    (alias, name or URL -> the granted physical name, or :class:`NotGranted`), the fence, the
    run's halt (where a refusal is noted for the guard, whatever the body does with it) and, for
    a strict writer, the check of the run's claim made right before each request."""

    def __init__(
        self,
        client: Any,
        resolve: Callable[[str], str],
        fence: RunFence,
        halt: Halt,
        check_claim: Callable[[], None] | None = None,
    ) -> None:
        self._client = client
        self._resolve = resolve
        self._fence = fence
        self._halt = halt
        self._strict_check = check_claim or (lambda: None)
        """Strict (``run.fenced.strict``): reads the run's claim, ``Fenced`` if it moved on."""

    def _check_claim(self) -> None:
        """Right before each request: nothing more once the run was told it is cancelled, and
        (strict) the run's claim read."""
        self._halt.refuse_if_cancelled()
        self._strict_check()

    def _refused(self, resource: str, newer: str | None) -> Fenced:
        """The :class:`Fenced` to raise, noted on the run's halt."""
        return refused(self._halt, resource, self._fence, newer)


def refused(halt: Halt, resource: str, fence: RunFence, newer: str | None) -> Fenced:
    """A refusal of ``fence``'s write to ``resource`` (``newer``: the fence found there),
    noted on ``halt`` before it is raised."""
    error = Fenced(resource, fence.value, newer)
    halt.note(error)
    return error

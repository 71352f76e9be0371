"""A local AWS account: the synthesized stack deployed on moto, completed, ready to invoke."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import boto3
from moto import mock_aws

from vigil_tools.emulator.complete import complete, forget_completed, refresh_parameters
from vigil_tools.emulator.deploy import Deployed, deploy, update
from vigil_tools.emulator.event_log import capture_events
from vigil_tools.emulator.intrinsics import Resolver
from vigil_tools.emulator.moto_memory import install as keep_moto_flat
from vigil_tools.emulator.moto_names import install as make_sqs_attributes_fast
from vigil_tools.emulator.moto_responses import install as make_moto_answer_fast
from vigil_tools.emulator.moto_speed import install as make_moto_fast
from vigil_tools.emulator.moto_sqs_fifo import install as keep_fifo_queues_as_sqs_does
from vigil_tools.emulator.template import Synthesized, load, synthesize
from vigil_tools.project import Project

REGION = "us-east-1"


@dataclass
class RequestCounter:
    """Counts AWS requests by service and operation, from botocore's own events."""

    counts: Counter[str] = field(default_factory=Counter)

    def __call__(self, model: Any, **_: Any) -> None:
        self.counts[f"{model.service_model.service_name}:{model.name}"] += 1

    def total(self, service: str) -> int:
        return sum(n for key, n in self.counts.items() if key.startswith(f"{service}:"))


T = TypeVar("T")


@dataclass(frozen=True)
class Placed:
    """A deployed resource: its construct path, logical id (in its own stack), template entry and
    physical id."""

    path: str
    logical_id: str
    resource: dict[str, Any]
    physical_id: str


@dataclass
class LocalAccount:
    session: Any
    synth: Synthesized
    deployed: Deployed
    resolver: Resolver
    created: dict[str, int]
    requests: RequestCounter
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What readers derive from this deployment (its catalogs, schedules, rules), read once:
    the testing kit builds a stack on the same deployment for every test (:meth:`once`)."""

    def physical_id(self, logical_id: str) -> str:
        """A resource of the stack itself (a nested stack's: :meth:`everywhere`)."""
        return self.deployed.physical_id(logical_id)

    def everywhere(self, resource_type: str) -> list[Placed]:
        """Every resource of a type in the stack and its nested ones (the shards of jobs and
        tasks), each with its construct path and physical id."""
        deployed = dict(self.deployed.stacks())
        found: list[Placed] = []
        for path, synth in self.synth.stacks():
            stack = deployed.get(path)
            if stack is None:
                continue
            for logical_id, resource in synth.resources(resource_type).items():
                construct = str(resource.get("Metadata", {}).get("aws:cdk:path", logical_id))
                found.append(Placed(construct, logical_id, resource, stack.physical[logical_id]))
        return found

    def once(self, key: str, read: Callable[[], T]) -> T:
        """``read()`` the first time ``key`` is asked of this deployment; the same answer after."""
        if key not in self.derived:
            self.derived[key] = read()
        return cast(T, self.derived[key])

    def redeploy(self, synth: Synthesized, *, quiet: bool = True) -> None:
        """Deploy ``synth`` over this account's stack, as ``cdk deploy`` of a newer version does
        (:func:`vigil_tools.emulator.deploy.update`): the data stays, running tasks run on, and
        what readers derived from the earlier deployment is read again."""
        forget_completed(self.resolver)
        with _quiet() if quiet else contextlib.nullcontext():
            self.deployed = update(synth, self.session, stack_name=self.deployed.stack_name)
        self.synth = synth
        self.resolver = Resolver(synth, self.deployed, self.session)
        refresh_parameters(self.resolver)
        self.created = complete(synth, self.resolver)
        self.derived.clear()


@contextmanager
def local_account(
    cdk_out: Path | None = None, *, quiet: bool = True, project: Project | None = None
) -> Iterator[LocalAccount]:
    """Synthesize the project (or load ``cdk_out``), then deploy into a fresh in-process emulator."""
    synth = load(cdk_out) if cdk_out else synthesize(project=project)
    with mock_aws():
        boto3.setup_default_session(
            region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
        )
        session = boto3.DEFAULT_SESSION
        assert session is not None
        yield deploy_account(synth, session, quiet=quiet)


def deploy_account(synth: Synthesized, session: Any, *, quiet: bool = True) -> LocalAccount:
    """Deploy and complete ``synth`` through ``session`` (in-process moto or a moto server)."""
    keep_moto_flat()  # an account may run all day: moto must not grow with every write
    make_moto_fast()  # nor spend most of each write re-parsing its expressions
    make_moto_answer_fast()  # nor most of each answer asking where each field is
    keep_fifo_queues_as_sqs_does()  # a group's order after a timeout, 5-minute deduplication
    make_sqs_attributes_fast()  # nor most of a queue's attributes renaming them
    counter = RequestCounter()
    session.events.register("before-call.*.*", counter)
    # moto warns once per resource its CloudFormation skips; complete() creates those.
    with _quiet() if quiet else contextlib.nullcontext():
        deployed = deploy(synth, session)
    resolver = Resolver(synth, deployed, session)
    created = complete(synth, resolver)
    capture_events(session)
    counter.counts.clear()
    return LocalAccount(session, synth, deployed, resolver, created, counter)


@contextmanager
def _quiet() -> Iterator[None]:
    moto_logger = logging.getLogger("moto")
    level = moto_logger.level
    moto_logger.setLevel(logging.ERROR)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        moto_logger.setLevel(level)

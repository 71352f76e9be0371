"""Shared fixtures: every AWS call in the suite goes to moto, and time comes from a manual clock."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, settings
from moto import mock_aws

from vigil.clock import ManualClock
from vigil_tools.node import use_installed_node

# jsii (and every app.py, make or CDK CLI the suite starts) runs the pinned Node of .venv/bin, also
# when pytest was started without make: before anything loads the CDK (tests/packaging/test_node.py).
use_installed_node()
# The CDK's built-in CloudFormation validation (a WebAssembly build of cfn-lint's rules, on by
# default in every synth) costs ~8 CPU s to start in each process that synthesizes (every worker,
# the controller's synth) and ~2 s per app template, and it runs in every test's small stack too.
# The suite proves what it checks without paying that in each process: cfn-lint itself runs on both
# stages' templates (tests/infra/test_scanners.py), and the CDK CLI's synth, the path a deploy
# takes, runs the built-in validation and finds nothing (tests/infra/test_cdk_cli.py, whose
# process gets it back). Also read by the CDK's Node process as jsii starts it: before anything
# loads the CDK. CDK_VALIDATION=true in the environment turns it on for a run.
os.environ.setdefault("CDK_VALIDATION", "false")

REGION = "us-east-1"
TESTS = Path(__file__).parent
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "false",
    "POWERTOOLS_DEV": "false",
}
"""Every test's environment (:func:`_no_real_aws`), and the controller's synth's."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which Python this run proves: the runtime Lambda and the observer image run, or another."""
    terminalreporter.write_line(_runtime_line())


def _runtime_line() -> str:
    from infra.function import RUNTIME

    lambda_version = RUNTIME.name.removeprefix("python")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here == lambda_version:
        return f"vigil: Python {here}, the version Lambda and the observer image run"
    return (
        f"vigil: WARNING: Python {here}, but Lambda and the observer image run {lambda_version}: "
        f"this run does not prove the deployed runtime (install Python {lambda_version})"
    )


settings.register_profile(
    "vigil",
    # The same examples on every run and in every worker: a property that fails, fails again.
    derandomize=True,
    database=None,
    # Timing is the machine's load, not the code's: no deadline, no too-slow health check.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", deadline=None)
"""``pytest --hypothesis-profile=explore``: new random examples each run, to look for new failures."""


def pytest_configure(config: pytest.Config) -> None:
    """The ``vigil_stack`` plugin, as ``pip install .`` registers it (entry point ``pytest11``):
    registered here when this checkout's installed metadata predates the entry point."""
    import freezegun

    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("vigil")
    # Each process synthesizes into a folder of its own, never the checkout's cdk.out where
    # pytest-xdist workers would read each other's templates. Set before collection: the CDK's Node
    # process reads CDK_OUTDIR once, when the first test module imports aws_cdk.
    outdir = tempfile.mkdtemp(prefix="vigil-cdk.out-")
    os.environ["CDK_OUTDIR"] = outdir
    config.add_cleanup(lambda: shutil.rmtree(outdir, ignore_errors=True))
    # No test starts an EC2 instance: moto need not build its ~2,400 default AMIs each time a
    # test's mock first touches EC2 (a VPC for the fleet, the stack's deploy), ~0.5 CPU s apiece.
    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")

    from vigil_tools.testing import plugin

    # Frozen clocks in tests must not freeze pytest's own timing, or --durations reports years.
    freezegun.configure(extend_ignore_list=["_pytest.timing"])
    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "vigil")
    from vigil_tools.emulator import moto_speed

    moto_speed.install()  # moto's DynamoDB writes, minus the repeated parsing (its docstring)
    from vigil_tools.emulator import moto_responses

    moto_responses.install()  # moto's answers, minus asking each field's names again
    from vigil_tools.emulator import model_loader

    model_loader.install()  # each test's new boto3 session, without decoding the models again
    from vigil_tools.emulator import botocore_speed

    botocore_speed.install()  # nor asking again what no session changes (its docstring)


def pytest_sessionstart(session: pytest.Session) -> None:
    _start_the_shared_synth(session.config)


def _start_the_shared_synth(config: pytest.Config) -> None:
    """``make test``'s controller starts the app's one synth as it starts its workers.

    pytest-xdist's controller runs no test: without this, the first worker to need the template
    synthesizes (~15 CPU s) while the other waits on the lock, idle. The synth runs in a process
    of the controller's, holding the lock of the folder the workers share (``VIGIL_SYNTH_DIR``,
    :func:`_outputs_of_this_run`), while the workers run the slow modules that do not need it
    (:func:`pytest_collection_modifyitems` hands those out first); a worker that needs it sooner
    waits on the lock, as before, and never synthesizes it twice. Only for a whole run with workers
    that selects the slow tests: a run of some files, or ``make test-fast``, pays for no synth.
    """
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    if "slow" in (config.getoption("markexpr", "") or ""):
        return
    from vigil_tools.emulator.template import SHARED_SYNTH_ENV

    folder = config._tmp_path_factory.getbasetemp() / "synth"  # the workers' run / "synth"
    root = TESTS.parent
    environment = {
        **os.environ,
        **FAKE_CREDENTIALS,
        SHARED_SYNTH_ENV: str(folder),
        "PYTHONPATH": os.pathsep.join(
            [str(root / "functions"), str(root), os.environ.get("PYTHONPATH", "")]
        ),
    }
    synth = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from vigil_tools.emulator.template import synthesized_app as s; s()",
        ],
        cwd=root,
        env=environment,
        stdout=subprocess.DEVNULL,
    )
    config.add_cleanup(functools.partial(_stop, synth))


def _stop(process: subprocess.Popen[bytes]) -> None:
    """A synth still running when the run ends (every test that needed it failed first) stops."""
    if process.poll() is None:
        process.terminate()
    process.wait()


SLOW_DIRECTORIES = frozenset(
    {"examples", "infra", "integration", "local", "packaging", "testing_kit"}
)
"""Folders under tests/ whose every test is slow: CDK synths and the scanners, the demo, the local
stack's emulator (Lambda deploys, queue mappings, processes), the testing kit's deployed stack,
builds of the distribution."""
SLOW_FIXTURES = frozenset(
    {
        "synthesized",  # the app's synth (shared, but ~15 CPU s the first time)
        "staging",  # a named stage's synth (shared too)
        "migrating",  # the app under -c legacyRegistry=true (shared too)
        "vigil_stack",  # the app deployed on the emulator
        "runs_table",  # tables created from the synthesized template ...
        "registry_table",
        "api_env",
        "fleet",
        "pool",
        "pooled_only",
        "endpoint",  # a moto server, for the tests that run a container's process
    }
)
"""Fixtures that make a test slow wherever it is."""
SHARED_SYNTH_FIXTURES = (SLOW_FIXTURES - {"endpoint"}) | {"_vigil_session"}
"""Fixtures that load the run's one synth of the app (the ``endpoint`` server does not)."""


def synthesizing_helpers() -> dict[int, str]:
    """The helpers that synthesize the app (or load its synth): a module importing one is slow."""
    from tests.helpers import moto_fleet, observers, pooled_fleet
    from vigil_tools.emulator import account, template

    helpers: list[Any] = [
        template.synthesized_app,
        template.synthesize,
        account.local_account,
        observers.create_registry_table,
        observers.create_idempotency_table,
        observers.create_hosts_table,
        moto_fleet.create_registry_table,
        moto_fleet.MotoFleet,
        pooled_fleet.PooledFleet,
    ]
    return {id(helper): helper.__name__ for helper in helpers}


def slow_reason(
    path: Path, fixtures: Iterable[str], marked: bool, helpers: Iterable[str] = ()
) -> str | None:
    """Why a test is in ``-m slow`` (``make test`` only), or None: it is in ``make test-fast``.

    Every test is one or the other: test-fast selects ``-m "not slow"``, the complement of the
    marker this gives (``pytest_collection_modifyitems``), and ``make test`` selects nothing.
    """
    if marked:
        return "marked slow"
    parts = path.relative_to(TESTS).parts
    if len(parts) > 1 and parts[0] in SLOW_DIRECTORIES:
        return f"in tests/{parts[0]}/"
    used = sorted(SLOW_FIXTURES.intersection(fixtures)) or sorted(helpers)
    return f"uses {', '.join(used)}" if used else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests; then run the modules holding any first (those needing no synth of
    the app before those that do), each module's tests together and in their order: pytest-xdist
    (``make test``) hands whole modules to whichever worker is free, so the long ones start early
    and the many short ones fill in at the end."""
    synthesizing = synthesizing_helpers()
    imported: dict[Path, list[str]] = {}
    for item in items:
        module = getattr(item, "module", None)
        if item.path not in imported:
            names = vars(module).values() if module is not None else ()
            imported[item.path] = [synthesizing[id(n)] for n in names if id(n) in synthesizing]
        marked = item.get_closest_marker("slow") is not None
        fixtures = getattr(item, "fixturenames", ())
        if not marked and slow_reason(item.path, fixtures, marked, imported[item.path]):
            item.add_marker(pytest.mark.slow)
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    synth_modules = {
        item.path
        for item in items
        if imported[item.path]
        or SHARED_SYNTH_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    }
    # Stable: the order otherwise kept. The slow modules that need no synth go first, while the
    # controller synthesizes (_start_the_shared_synth).
    items.sort(key=lambda item: (item.path not in slow_modules, item.path in synth_modules))


ONE_WORKER_PACKAGES = ("tests/integration/demo/",)
"""Packages whose modules share a package-scoped fixture (the demo's one run): ``make test``
hands each to one worker whole, or every worker given one of its modules would build it again."""


def work_unit(nodeid: str) -> str:
    """What ``make test`` (``--dist loadscope``) hands to one worker: a test's module (or class),
    or its whole package when that is one of :data:`ONE_WORKER_PACKAGES`."""
    for package in ONE_WORKER_PACKAGES:
        if nodeid.startswith(package):
            return package
    return nodeid.rsplit("::", 1)[0]  # pytest-xdist's own loadscope unit


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :func:`work_unit`'s units; any other mode as pytest-xdist has it."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SharedFixtureScopes(config, log)


@pytest.fixture(autouse=True)
def _fast_tests_do_not_synthesize(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test outside ``-m slow`` that synthesizes the app fails, saying how to classify it (in
    ``make test-fast``, where no slow test has synthesized it for the process first)."""
    if request.node.get_closest_marker("slow") is not None:
        return
    from vigil_tools.emulator import template

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(
            f"{request.node.nodeid} synthesizes the app: mark it slow (pytest.mark.slow, or "
            "SLOW_FIXTURES / SLOW_DIRECTORIES in tests/conftest.py) so make test-fast stays fast"
        )

    monkeypatch.setattr(template, "synthesize", refuse)


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials everywhere, so no test can reach a real account by accident."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session", autouse=True)
def _outputs_of_this_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The app's one synth is shared by every worker of the run (``synthesized_app``); each
    process's own stacks go to its own CDK_OUTDIR (``pytest_configure``)."""
    from vigil_tools.emulator.template import SHARED_SYNTH_ENV

    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # each worker's basetemp is a folder in the run's
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SHARED_SYNTH_ENV, str(run / "synth"))
        yield


@pytest.fixture(scope="session")
def synthesized() -> Any:
    """The app's CloudFormation template, synthesized once per test run (shared by its workers)."""
    from vigil_tools.emulator.template import synthesized_app

    return synthesized_app()


@pytest.fixture(scope="session")
def staging() -> Any:
    """A named stage's app (``-c stage=staging``), synthesized once per test run like the default's
    (shared by its workers): the stages' tests and the scanners read it, from either worker."""
    from tests.helpers.stages import STAGING
    from vigil_tools.emulator.template import synthesized_app

    return synthesized_app(STAGING)


@pytest.fixture(scope="session")
def migrating() -> Any:
    """The app as the upgrade from a name-keyed registry deploys it (``-c legacyRegistry=true``),
    synthesized once per test run like the default's (shared by its workers)."""
    from tests.helpers.stages import MIGRATING
    from vigil_tools.emulator.template import synthesized_app

    return synthesized_app(context=MIGRATING)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


class SerializedClient:
    """Wraps a boto3 client so requests from many threads reach moto one at a time.

    moto applies a request non-atomically (NOTES.md); real DynamoDB applies each request atomically.
    One lock around each call gives moto the same per-request atomicity while the threads still
    interleave between requests, which is where the races in the guard live.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


@pytest.fixture
def serialized() -> type[SerializedClient]:
    return SerializedClient

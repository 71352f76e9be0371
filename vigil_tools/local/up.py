"""``vigil local up [--port P] [--speed X] [--quiet]``: start, print the exports, run, stop cleanly.

Order: bind the port (a port in use fails before anything else), synthesize and deploy the
template on the endpoint, print the ``export`` lines, then run the live loop until Ctrl-C,
SIGTERM or SIGHUP (the terminal closed: the containers are in sessions of their own, so nothing
else would stop them); on the way out every container process is stopped (SIGTERM, then SIGKILL after a grace)
and reaped, and the endpoint is shut.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from vigil.contract.tasks import CATALOG_ENV
from vigil.tasks.catalog import Catalog
from vigil_tools.local.interrupts import Interrupts, Stopped
from vigil_tools.project import ProjectNotFound, find_project

DEFAULT_PORT = 4580
REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
LOG_DIR = Path(".vigil-local/logs")
"""Under the project's root: function and container logs."""
TICK_SECONDS = 0.25
VIEW_SECONDS = 1.0
READY = "vigil local up: ready"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Each stops ``vigil local up`` and everything it started."""


def add_parser(groups: Any) -> None:
    local = groups.add_parser("local", help="the whole stack, live on this machine")
    commands = local.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="serve the emulated AWS and run the app on it")
    up.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    up.add_argument("--speed", type=float, default=1.0, help="schedules run X times as fast")
    up.add_argument("--quiet", action="store_true", help="no live view")
    up.add_argument("--project", help="the Vigil checkout (default: found from here)")
    up.add_argument("--cdk-out", help="a cloud assembly already synthesized from the project")


def exports(endpoint_url: str, api_url: str) -> dict[str, str]:
    """What points the AWS CLI (and boto3) and the ``vigil`` CLI at the local stack."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        **CREDENTIALS,
        "VIGIL_API_URL": api_url,
    }


def pointer_lines(env: dict[str, str]) -> list[str]:
    """What points both CLIs at the stack, pasteable into a shell: the ``export`` lines, one per
    variable, then an AWS CLI command with ``--endpoint-url`` (AWS CLI v1 does not apply
    ``AWS_ENDPOINT_URL`` to every service: its ``sqs`` commands still go to AWS)."""
    return [
        "# Point the vigil CLI, boto3 and the AWS CLI at it:",
        *(f"export {name}={shlex.quote(value)}" for name, value in env.items()),
        "# AWS CLI v1 ignores AWS_ENDPOINT_URL for some services (sqs): give it --endpoint-url",
        f"aws --endpoint-url {env['AWS_ENDPOINT_URL']} sqs list-queues",
    ]


class _CannotStart(Exception):
    pass


def _endpoint(port: int) -> Any:
    """The endpoint, bound (a port in use fails here, before anything is synthesized)."""
    try:
        from vigil_tools.local.endpoint import LocalEndpoint, PortInUse
    except ImportError as missing:
        raise _CannotStart(
            f"`vigil local up` needs the emulator: pip install '.[demo]' ({missing})"
        ) from None
    try:
        return LocalEndpoint(port)
    except PortInUse as busy:
        raise _CannotStart(str(busy)) from None


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, checked before anything starts: a bad port or speed
    would otherwise fail deep inside (an OverflowError at bind, a NaN clock after deploy)."""
    if not 0 <= args.port <= 65535:
        return f"--port must be between 0 and 65535, not {args.port}"
    if not math.isfinite(args.speed):
        return f"--speed must be a finite positive number, not {args.speed}"
    if args.speed <= 0:
        return "--speed must be positive"
    if args.cdk_out and not Path(args.cdk_out).is_dir():
        return f"--cdk-out {args.cdk_out}: no such folder (synthesize with `cdk synth -o DIR`)"
    return None


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    problem = argument_problem(args)
    if problem:
        print(f"error: {problem}", file=err)
        return 2
    try:
        project = find_project(args.project)
        endpoint = _endpoint(args.port)
    except (ProjectNotFound, _CannotStart) as problem:
        print(f"error: {problem}", file=err)
        return 2
    interrupts = Interrupts()
    stop = interrupts.stop
    previous = {s: signal.signal(s, interrupts.on_signal) for s in STOP_SIGNALS}
    endpoint.start()
    stack: _Running | None = None
    try:
        stack = _Running.start(project, endpoint, args, out, err, interrupts)
        print(READY, file=out, flush=True)
        stack.loop(stop, quiet=args.quiet)
    except Stopped:
        pass
    except Exception as error:
        from vigil_tools.emulator.deploy import DeployFailed

        if not isinstance(error, DeployFailed):
            raise
        print(f"error: {error}", file=err)
        return 1
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        if stack is not None:
            stack.shutdown(out)
        endpoint.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("vigil local up: stopped, nothing left running", file=out, flush=True)
    return 0


@dataclass
class _Running:
    """The deployed stack and its live parts."""

    session: Any
    live: Any
    containers: Any
    fleet: Any
    catalog: Any
    clock: Any
    endpoint: Any
    speed: float
    out: TextIO
    pointers: list[str]
    tasks: Catalog | None = None
    """What points both CLIs at the stack: printed at the start, kept atop the live view."""

    @classmethod
    def start(
        cls,
        project: Any,
        endpoint: Any,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        interrupts: Interrupts,
    ) -> _Running:
        import boto3
        from moto.moto_api import state_manager

        from vigil_tools.emulator.account import deploy_account
        from vigil_tools.emulator.fleet import DeployedFleet
        from vigil_tools.emulator.template import load, synthesize
        from vigil_tools.jobs_cli import JobsCatalog
        from vigil_tools.local.containers import ContainerProcesses, image_command
        from vigil_tools.local.live import Deliveries, Live, SerialLambda, SimulatedClock
        from vigil_tools.tasks_catalog import tasks_catalog

        env = exports(endpoint.url, endpoint.api_url)
        os.environ.update(env)  # the functions, run here, reach the endpoint too
        boto3.setup_default_session(region_name=REGION)
        session = boto3.DEFAULT_SESSION
        print(f"Synthesizing {project.root / 'app.py'} ...", file=err, flush=True)
        synth = load(Path(args.cdk_out)) if args.cdk_out else synthesize(project=project)
        print(f"Deploying stack on {endpoint.url} ...", file=err, flush=True)
        account = deploy_account(synth, session)
        # moto advances a task's status on every DescribeTasks unless told not to (NOTES.md).
        state_manager.set_transition(
            model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
        )
        log_dir = project.root / LOG_DIR
        clock = SimulatedClock(args.speed)
        # every retry delay waits on the event Ctrl-C sets: stopping never waits one out
        deliveries = Deliveries(interrupts.stop, speed=args.speed)
        runtime = SerialLambda(
            session,
            now=lambda: datetime.now(UTC),
            advance=deliveries.delay,
            log_dir=log_dir,
            functions_dir=project.functions,
        )
        fleet = DeployedFleet.of(account)
        live = Live(
            account,
            runtime,
            reconciler=fleet.reconciler,
            clock=clock,
            deliveries=deliveries,
            functions=project.functions,
            out=lambda line: print(line, file=err, flush=True),
            exclusive=endpoint.exclusive,
        )
        containers = ContainerProcesses(
            session=session,
            cluster=fleet.cluster,
            container=fleet.container,
            command=image_command(synth, project.functions),
            functions=project.functions,
            endpoint_env=env,
            log_dir=log_dir,
            deliver=live.task_event,
            held=interrupts.held,
            metadata=endpoint.task_metadata,
        )
        endpoint.api = _api(runtime, fleet.api_function, account)
        endpoint.console = _console(runtime, account)
        catalog = JobsCatalog.from_stack(session, account.deployed.stack_name)
        tasks = tasks_catalog(session, account.deployed.stack_name)
        if tasks:  # an application on this machine enqueues with it (vigil.tasks.enqueue)
            env[CATALOG_ENV] = json.dumps(tasks, separators=(",", ":"))
        print(
            f"Deployed {account.deployed.stack_name}: {account.deployed.resource_count} resources; "
            f"jobs {', '.join(sorted(catalog.jobs))}; tasks {', '.join(sorted(tasks)) or 'none'}; "
            f"logs in {log_dir}/",
            file=out,
        )
        pointers = pointer_lines(env)
        if endpoint.console is not None:
            pointers.append(f"# The console's pages (loopback only): {endpoint.url}/console")
        print("\n".join(pointers), file=out, flush=True)
        return cls(
            session=session,
            live=live,
            containers=containers,
            fleet=fleet,
            catalog=catalog,
            clock=clock,
            endpoint=endpoint,
            speed=args.speed,
            out=out,
            pointers=pointers,
            tasks=Catalog.parse(env[CATALOG_ENV]) if tasks else None,
        )

    def loop(self, stop: threading.Event, *, quiet: bool) -> None:
        from vigil_tools.local.view import CLEAR, render

        shown = 0.0
        while not stop.is_set():
            self.live.tick()
            self.containers.sync()
            if not quiet and self.clock.elapsed() - shown >= VIEW_SECONDS:
                shown = self.clock.elapsed()
                header = f"vigil local up on {self.endpoint.url} (speed x{self.speed:g})"
                screen = render(
                    self.session,
                    self.catalog,
                    self.fleet.registry_table,
                    self.clock(),
                    header,
                    self.tasks,
                    self.fleet.hosts_table,
                )
                # the screen is cleared: the export lines are drawn again, so they stay copyable
                print(CLEAR + "\n".join([*self.pointers, "", screen]), file=self.out, flush=True)
            stop.wait(TICK_SECONDS)

    def shutdown(self, out: TextIO) -> None:
        self.containers.stop_all()
        self.live.close()


def _api(runtime: Any, observers_function: str, account: Any) -> Any:
    """The management API: ``/jobs...`` to the jobs-control function, the rest to the
    observers' API function (the routes the deployed REST API integrates)."""
    functions = {
        config["Handler"]: config["FunctionName"]
        for logical_id in account.synth.resources("AWS::Lambda::Function")  # the stack's own
        for config in [
            account.session.client("lambda").get_function_configuration(
                FunctionName=account.physical_id(logical_id)
            )
        ]
    }
    jobs_function = functions.get("handlers.jobs_control.handler")

    def handle(event: dict[str, Any]) -> dict[str, Any]:
        function = (
            jobs_function
            if jobs_function and str(event["path"]).startswith("/jobs")
            else observers_function
        )
        # A manual tick the jobs API queues (an asynchronous invoke) is delivered by the loop.
        result = runtime.invoke(function, event)
        if not result.ok:
            raise RuntimeError(f"{result.error_type}: {result.error_message}")
        return dict(result.payload)

    return handle


def _console(runtime: Any, account: Any) -> Any:
    """The console's pages at /console, drawn by the deployed console functions (none: the app
    deploys no console)."""
    from vigil_tools.local.console import LocalConsole

    names = [
        account.physical_id(logical_id)
        for logical_id in account.synth.resources("AWS::Lambda::Function")
    ]
    return LocalConsole.of(runtime.invoke, account.session.client("lambda"), names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil")
    add_parser(parser.add_subparsers(dest="group", required=True))
    args = parser.parse_args(["local", *(argv if argv is not None else sys.argv[1:])])
    return run(args, sys.stdout, sys.stderr)

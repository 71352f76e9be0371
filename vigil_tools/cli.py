"""``vigil``: the operator CLI for observers, talking to the management API.

    vigil observers kinds
    vigil observers create NAME --kind K [--config JSON|@file] [--idempotency-key K]
    vigil observers list [--status S]
    vigil observers get NAME | stop NAME | restart NAME
    vigil observers settle NAME --effect E --done|--done-rerun|--not-done   (an UNCERTAIN ctx.once effect)
    vigil observers rebalance KIND [--max N]                   (a pooled kind: even its hosts' load)
    vigil hosts list [--kind K]                                   (pooled kinds' hosts)
    vigil jobs list | history JOB | redrive JOB | next JOB       (see vigil_tools/jobs_cli.py)
    vigil jobs run | pause | resume | backfill JOB ...          (see vigil_tools/jobs_control_cli.py)
    vigil upgrade drain [--delete]                               (see vigil_tools/upgrade.py)
    vigil local up [--port P] [--speed X] [--quiet]             (see vigil_tools/local/up.py)
    vigil --stage NAME <any of the above but local>             (the stack Vigil-NAME's API and data)

Observer requests are signed with SigV4 (service ``execute-api``) using the usual AWS credential chain, and
go to ``--endpoint``, or the API of ``--stage NAME``'s stack (``Vigil-NAME``, read from its outputs),
or ``VIGIL_API_URL`` (the API's stage URL). ``--stage`` also picks the stack ``vigil jobs`` and
``vigil tasks`` read. The transport is injectable: tests and the local emulator pass
``InProcessTransport(handler)`` to drive the Lambda handler directly.

Exit codes: 0 success, 1 the API refused the request, 2 bad usage or input, 3 the API could not be
reached (no endpoint, no credentials, network).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from vigil.contract.hosts import DEFAULT_REBALANCE_MOVES, MAX_REBALANCE_MOVES
from vigil.contract.observers import Status
from vigil.contract.stages import InvalidStage, check_stage
from vigil_tools import jobs_cli, jobs_control_cli, tasks_cli, upgrade
from vigil_tools.api_client import (
    ApiError,
    ObserversClient,
    SigV4Transport,
    Transport,
    Unreachable,
)
from vigil_tools.local import up as local_up
from vigil_tools.settle_cli import add_settle, flags, verdict_of
from vigil_tools.stacks import StackNotFound, stage_api_url
from vigil_tools.tables import render_table

EXIT_OK, EXIT_API_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
STATUSES = tuple(status.value for status in Status)


# -- the command line -------------------------------------------------------------------------


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and sys.exit(2)
        raise _Usage(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vigil", description="Operate Vigil's scheduled jobs, tasks and observers."
    )
    parser.add_argument("--stage", type=_stage, help="a named stage: its stack is Vigil-NAME")
    parser.add_argument(
        "--endpoint", help="the API's stage URL (default: the --stage's, else $VIGIL_API_URL)"
    )
    parser.add_argument("--region", help="the API's region (default: from the URL or AWS_REGION)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    groups = parser.add_subparsers(dest="group", required=True)
    jobs_cli.add_parser(groups)
    tasks_cli.add_parser(groups)
    upgrade.add_parser(groups)
    local_up.add_parser(groups)
    observers = groups.add_parser("observers", help="long-running observers")
    commands = observers.add_subparsers(dest="command", required=True)
    commands.add_parser("kinds", help="the kinds this fleet can run")
    create = commands.add_parser("create", help="register an observer")
    create.add_argument("name", help="the observer's name (lowercase letters, digits, dashes)")
    create.add_argument(
        "--kind", required=True, help="one of the fleet's kinds (`vigil observers kinds`)"
    )
    create.add_argument("--config", default="{}", help="a JSON object, or @file.json")
    create.add_argument("--idempotency-key", help="retrying with the same key is safe")
    listing = commands.add_parser("list", help="list observers")
    listing.add_argument(
        "--status", type=str.upper, choices=STATUSES, help="only observers in this status"
    )
    for command, text in (
        ("get", "show one observer"),
        ("stop", "stop an observer"),
        ("restart", "replace an observer's task"),
    ):
        commands.add_parser(command, help=text).add_argument("name", help="the observer's name")
    add_settle(
        commands,
        "name",
        None,
        done="it happened: the next generation skips it",
        done_rerun="the same as --done for an observer: its next generation always runs its "
        "code again, skipping the effect",
        not_done="it did not: the next generation does it",
    )
    rebalance = commands.add_parser("rebalance", help="even a pooled kind's load over its hosts")
    rebalance.add_argument("kind", help="a pooled kind")
    rebalance.add_argument(
        "--max",
        type=_moves,
        dest="max_moves",
        help=f"observers moved at most (1-{MAX_REBALANCE_MOVES}; default {DEFAULT_REBALANCE_MOVES})",
    )
    commands.add_parser(
        "migrate",
        help="an upgrade from a registry keyed by name: copied yet, and what still writes it",
    )
    hosts = groups.add_parser("hosts", help="the hosts of pooled kinds")
    host_commands = hosts.add_subparsers(dest="command", required=True)
    host_list = host_commands.add_parser("list", help="list hosts")
    host_list.add_argument("--kind", help="only this pooled kind's hosts")
    return parser


def _stage(raw: str) -> str:
    try:
        return check_stage(raw)
    except InvalidStage as invalid:
        raise argparse.ArgumentTypeError(str(invalid)) from None


def _moves(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
    if not 1 <= value <= MAX_REBALANCE_MOVES:
        raise argparse.ArgumentTypeError(f"{value} is not in 1-{MAX_REBALANCE_MOVES}")
    return value


def main(
    argv: Sequence[str] | None = None,
    *,
    transport: Transport | None = None,
    session: Any = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    env = os.environ if environ is None else environ
    try:
        args = build_parser().parse_args(argv)
        if args.group == "local":
            return local_up.run(args, out, err)
        if args.group == "jobs" and args.command not in jobs_control_cli.API_COMMANDS:
            return _jobs(args, session, out, err)
        if args.group == "tasks":
            return _tasks(args, session, out, err)
        if args.group == "upgrade":
            return _direct(
                args, session, err, lambda s: upgrade.run(args, s, out), upgrade.UpgradeError
            )
        config = _parse_config(args.config) if args.command == "create" else {}
        if transport is None:
            transport = SigV4Transport(_endpoint(args, session, env), region=args.region)
        if args.group == "jobs":
            return jobs_control_cli.run_api_command(args, ObserversClient(transport).call, out)
        result = _run(ObserversClient(transport), args, config)
    except _Usage as usage:
        print(usage, file=err)
        return EXIT_USAGE
    except ApiError as refused:
        print(f"error: {refused.message} ({refused.code}, HTTP {refused.status})", file=err)
        return EXIT_API_ERROR
    except Unreachable as unreachable:
        print(f"error: {unreachable}", file=err)
        return EXIT_UNREACHABLE
    except (jobs_control_cli.RunNotFinished, StackNotFound) as problem:
        print(f"error: {problem}", file=err)
        return EXIT_API_ERROR
    print(json.dumps(result, indent=2) if args.json else _human(args, result), file=out)
    return EXIT_OK


def _endpoint(args: argparse.Namespace, session: Any, env: Mapping[str, str]) -> str:
    """``--endpoint``; else the ``--stage``'s API, from its stack's outputs; else $VIGIL_API_URL."""
    if args.endpoint:
        return str(args.endpoint)
    if args.stage is not None:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        session = session or boto3.Session(region_name=args.region)
        try:
            return stage_api_url(session.client("cloudformation"), args.stage)
        except (BotoCoreError, ClientError) as error:
            raise Unreachable(f"cannot read stage {args.stage!r}'s stack: {error}") from error
    endpoint = env.get("VIGIL_API_URL")
    if not endpoint:
        raise Unreachable("no API endpoint: pass --stage or --endpoint, or set VIGIL_API_URL")
    return endpoint


def _jobs(args: argparse.Namespace, session: Any, out: TextIO, err: TextIO) -> int:
    """``vigil jobs``: talks to AWS directly (stack outputs, runs table, DLQ), not to the API."""
    return _direct(args, session, err, lambda s: jobs_cli.run(args, s, out), jobs_cli.JobsError)


def _tasks(args: argparse.Namespace, session: Any, out: TextIO, err: TextIO) -> int:
    """``vigil tasks``: talks to AWS directly (stack outputs, queues, tasks table), as
    ``vigil.tasks`` does in an application."""
    from botocore.exceptions import ClientError

    from vigil.tasks.errors import (
        EnqueuedUnrecorded,
        InvalidTask,
        KeyReused,
        NotCancellable,
        TaskNotFound,
    )
    from vigil.tasks.flows.errors import SignalRefused

    return _direct(
        args,
        session,
        err,
        lambda s: tasks_cli.run(args, s, out, as_json=args.json),
        tasks_cli.TasksError,
        InvalidTask,
        KeyReused,
        NotCancellable,
        SignalRefused,
        TaskNotFound,
        EnqueuedUnrecorded,
        ClientError,
    )


def _direct(
    args: argparse.Namespace,
    session: Any,
    err: TextIO,
    run: Callable[[Any], int],
    *refusals: type[Exception],
) -> int:
    """A command group that talks to AWS directly: it runs in ``session`` (else one in
    ``--region``); what the group names in ``refusals`` is the operator's to fix (exit 1), a
    botocore failure to reach AWS is exit 3."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        return run(session or boto3.Session(region_name=args.region))
    except refusals as problem:
        print(f"error: {problem}", file=err)
        return EXIT_API_ERROR
    except BotoCoreError as unreachable:
        print(f"error: {unreachable}", file=err)
        return EXIT_UNREACHABLE


def _run(client: ObserversClient, args: argparse.Namespace, config: dict[str, Any]) -> Any:
    if args.group == "hosts":
        args.command = "hosts-list"  # the one hosts command; printed as a hosts table
    match args.command:
        case "kinds":
            return client.kinds()
        case "create":
            return client.create(args.name, args.kind, config, args.idempotency_key)
        case "list":
            return client.list(args.status)
        case "hosts-list":
            return client.hosts(args.kind)
        case "get":
            return client.get(args.name)
        case "stop":
            return client.stop(args.name)
        case "restart":
            return client.restart(args.name)
        case "settle":
            return client.settle(args.name, args.effect, verdict=verdict_of(args))
        case "rebalance":
            return client.rebalance(args.kind, args.max_moves)
        case "migrate":
            return client.migration()
    raise _Usage(f"unknown command {args.command!r}")  # pragma: no cover - argparse refuses it


def _parse_config(raw: str) -> dict[str, Any]:
    if raw.startswith("@"):
        try:
            raw = Path(raw[1:]).read_text()
        except OSError as error:
            raise _Usage(f"--config: cannot read {raw[1:]}: {error.strerror}") from error
    try:
        config = json.loads(raw)
    except ValueError as error:
        raise _Usage(f"--config is not JSON: {error}") from error
    if not isinstance(config, dict):
        raise _Usage(f"--config must be a JSON object, got {type(config).__name__}")
    return config


_COLUMNS = (
    ("NAME", "name"),
    ("KIND", "kind"),
    ("STATUS", "status"),
    ("DESIRED", "desired"),
    ("GEN", "generation"),
    ("RESTARTS", "restarts"),
    ("HEARTBEAT", "heartbeat_at"),
)


_HOST_COLUMNS = (
    ("ID", "id"),
    ("KIND", "kind"),
    ("STATUS", "status"),
    ("USED", "used"),
    ("FREE", "free"),
    ("HEARTBEAT_AGE_S", "heartbeat_age_seconds"),
    ("REVISION", "revision"),
    ("TASK", "task_arn"),
)


def _human(args: argparse.Namespace, result: Any) -> str:
    command = args.command
    if command == "hosts-list":
        if not result:
            return "(no hosts)"
        header = [h for h, _ in _HOST_COLUMNS]
        rows = [[_cell(h.get(key)) for _, key in _HOST_COLUMNS] for h in result]
        return render_table(header, rows)
    if command == "kinds":
        return "\n".join(result) if result else "(no kinds)"
    if command == "list":
        return _table(result) if result else "(no observers)"
    if command == "rebalance":
        return (
            f"rebalance of {result['kind']} requested: at most {result['max']} observers move, "
            f"fullest hosts to emptiest (requested by {result['requested_by']})"
        )
    if command == "settle":
        return _settled(args, result)
    if command == "migrate":
        return _migration(result)
    if command in ("create", "stop", "restart"):
        verb = {"create": "created", "stop": "stopping", "restart": "restart requested for"}
        headline = f"{verb[command]} {result['name']}: status {result['status']}, desired {result['desired']}"
        return headline + "\n\n" + _details(result)
    return _details(result) + _to_settle(result)


def _migration(status: Mapping[str, Any]) -> str:
    """Where the upgrade from a registry keyed by name stands, and the operator's next step
    (docs/guides/deploying.md "Upgrading to the registry keyed by kind")."""
    table = status.get("legacy_table")
    if not table:
        return (
            "no registry keyed by name is wired to this deployment (deployed without "
            "-c legacyRegistry=true): nothing to migrate"
        )
    if status.get("copied_at") is None:
        return (
            f"migrating from {table}: the reconciler has not copied it yet (it does at its next "
            "invocation, within a minute); the API answers 503 until then"
        )
    lines = [f"copied {status['copied']} observers from {table} at {status['copied_at']}"]
    if status.get("conflicts"):
        names = ", ".join(status["conflicts"])
        lines.append(f"NOT copied (the name is another kind's here): {names}")
    writing = status.get("writing_old_registry") or []
    if writing:
        lines.append(f"still writing the old registry ({len(writing)}): {', '.join(writing)}")
        lines.append(
            "next: wait (each kind's rollout hands them over, max_unavailable at a time), "
            "then `vigil observers migrate` again"
        )
    else:
        lines.append(
            "no observer writes the old registry any more: deploy without the context "
            "(`npx cdk deploy`) to drop it and its grants from the stack (the table is "
            "retained: delete it by hand once no longer wanted)"
        )
    return "\n".join(lines)


def _to_settle(observer: Mapping[str, Any]) -> str:
    """An uncertain observer's next step, under its details."""
    effect = observer.get("uncertain_effect")
    if not effect:
        return ""
    return (
        f"\n\nUNCERTAIN on effect {effect!r}: find out whether it happened, then "
        f"`vigil observers settle {observer['name']} --effect {effect} {flags()}`"
    )


def _settled(args: argparse.Namespace, observer: Mapping[str, Any]) -> str:
    """What the settlement did, and what to watch next."""
    name = observer["name"]
    if verdict_of(args).happened:
        said = f"effect {args.effect!r} recorded done: the next generation skips it"
    else:
        said = f"effect {args.effect!r} cleared: the next generation does it again"
    return (
        f"settled {name}: {said}\n"
        f"restart requested: status {observer['status']}, desired {observer['desired']}; "
        f"the reconciler starts generation {int(observer['generation']) + 1}\n"
        f"next: `vigil observers get {name}` (status RUNNING once it has claimed)"
    )


def _table(observers: list[dict[str, Any]]) -> str:
    """The HOST column appears when some observer runs pooled, UNCERTAIN (the effect to settle)
    when some observer stopped on one, REASON (last: it is free text) when some observer waits
    with a reason, so a dedicated, healthy fleet's table stays."""
    columns: tuple[tuple[str, str], ...] = _COLUMNS
    for column in (
        ("HOST", "host"),
        ("UNCERTAIN", "uncertain_effect"),
        ("REASON", "status_reason"),
    ):
        if any(o.get(column[1]) for o in observers):
            columns = (*columns, column)
    header = [h for h, _ in columns]
    return render_table(header, [[_cell(o.get(key)) for _, key in columns] for o in observers])


def _details(observer: Mapping[str, Any]) -> str:
    width = max(len(k) for k in observer)
    lines = []
    for key, value in observer.items():
        shown = json.dumps(value) if isinstance(value, dict | list) else _cell(value)
        lines.append(f"{key.ljust(width)}  {shown}")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


if __name__ == "__main__":
    sys.exit(main())

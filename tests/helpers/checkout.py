"""What the suite may not touch in the checkout: its ``cdk.out``, which ``make synth``,
``make cdk-synth`` and a person's own ``cdk`` commands write.

A test that wrote there would read what an earlier target (or another worker) left, or have its
files removed under it: the CDK CLI empties its output's ``performance-counters.json`` before every
synth. Each test process synthesizes into its own ``CDK_OUTDIR`` (tests/conftest.py) and the CLI's
test into its own folder; the run compares the folder before and after (:func:`changes`).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT_CDK_OUT = ROOT / "cdk.out"

Snapshot = dict[str, tuple[int, int]] | None
"""Each file's path (relative) -> its modification time (ns) and size; None: no folder."""


def snapshot(folder: Path = CHECKOUT_CDK_OUT) -> Snapshot:
    if not folder.is_dir():
        return None
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            status = path.stat()
            files[str(path.relative_to(folder))] = (status.st_mtime_ns, status.st_size)
    return files


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line per file (or the folder itself), empty when nothing does."""
    if before is None and after is None:
        return []
    if before is None or after is None:
        return ["the folder was created" if before is None else "the folder was removed"]
    lines = [f"added {name}" for name in sorted(after.keys() - before.keys())]
    lines += [f"removed {name}" for name in sorted(before.keys() - after.keys())]
    lines += [
        f"rewritten {name}"
        for name in sorted(before.keys() & after.keys())
        if before[name] != after[name]
    ]
    return lines


def report(before: Snapshot, after: Snapshot, folder: Path = CHECKOUT_CDK_OUT) -> str | None:
    """The run's error, or None: a test wrote into the checkout's ``cdk.out``."""
    found = changes(before, after)
    if not found:
        return None
    shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    return (
        f"the suite changed {folder} ({shown}): a test must synthesize into a folder of its own "
        "(its process's CDK_OUTDIR, tmp_path, or cdk --output), never the checkout's, which "
        "earlier targets and other workers share (or something outside the run wrote there)"
    )

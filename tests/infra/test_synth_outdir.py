"""Each test process synthesizes into its own folder, whatever CDK_OUTDIR the caller exported: the
CDK's Node process reads it once, when a module like this one imports aws_cdk at collection."""

from __future__ import annotations

import os
from pathlib import Path

import aws_cdk


def test_the_apps_outdir_is_this_process_own_and_not_the_checkouts() -> None:
    outdir = Path(aws_cdk.App().outdir)
    assert outdir == Path(os.environ["CDK_OUTDIR"])
    assert outdir.resolve() != (Path(__file__).parents[2] / "cdk.out").resolve()

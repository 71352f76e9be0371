"""cdk.json sets every feature flag the pinned aws-cdk-lib recommends (what ``cdk init`` writes).

aws-cdk-lib ships the list (``recommended-feature-flags.json`` in its jsii bundle); a CDK upgrade
that recommends a new flag fails this test until cdk.json decides it. A flag set against the
recommendation says why here.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk

from infra.pins import pinned

ROOT = Path(__file__).resolve().parents[2]
AGAINST_RECOMMENDATION: dict[str, tuple[Any, str]] = {
    "@aws-cdk/core:target-partitions": (
        ["aws"],
        "The Powertools layer parameter and the observer image's base exist in the aws partition "
        "only; Vigil is not built or tested for aws-cn",
    ),
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": (
        False,
        "Nothing uses the observer VPC's default security group (tasks have their own, outbound "
        "only); restricting it adds a custom-resource Node.js function with AWS's basic execution "
        "role (writes to every log group) that the local emulator cannot run. Bring a VPC with "
        "vpc= to manage its default group",
    ),
}


def recommended() -> dict[str, Any]:
    (bundle,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    assert bundle.name == f"aws-cdk-lib@{pinned('aws-cdk-lib')}.jsii.tgz"
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags: dict[str, Any] = json.load(member)
    return flags


def test_cdk_json_sets_every_recommended_flag_as_recommended_or_says_why() -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    flags = recommended()
    assert len(flags) > 80
    assert sorted(set(flags) - set(context)) == [], "missing from cdk.json"
    for flag, value in flags.items():
        if flag in AGAINST_RECOMMENDATION:
            ours, reason = AGAINST_RECOMMENDATION[flag]
            assert context[flag] == ours != value and len(reason) >= 40, flag
        else:
            assert context[flag] == value, flag

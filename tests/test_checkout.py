"""The run's guard over the checkout's cdk.out (tests/helpers/checkout.py, tests/conftest.py):
a test that writes there, as the CDK CLI's test did, fails the run naming what it changed."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.checkout import CHECKOUT_CDK_OUT, changes, report, snapshot


def test_a_folder_left_alone_reports_nothing(tmp_path: Path) -> None:
    assert report(snapshot(tmp_path / "cdk.out"), snapshot(tmp_path / "cdk.out")) is None
    (tmp_path / "cdk.out").mkdir()
    (tmp_path / "cdk.out" / "Vigil.template.json").write_text("{}")
    assert changes(snapshot(tmp_path / "cdk.out"), snapshot(tmp_path / "cdk.out")) == []


def test_a_synth_into_the_checkouts_folder_is_reported(tmp_path: Path) -> None:
    # Given the folder a fresh clone has (none), then what make synth leaves
    folder = tmp_path / "cdk.out"
    fresh = snapshot(folder)
    folder.mkdir()
    (folder / "Vigil.template.json").write_text("{}")
    (folder / "performance-counters.json").write_text("{}")
    synthesized = snapshot(folder)
    assert changes(fresh, synthesized) == ["the folder was created"]
    # When a test synthesizes there again: the CLI removes the counters, rewrites the template
    (folder / "performance-counters.json").unlink()
    template = folder / "Vigil.template.json"
    template.write_text('{"Resources": {}}')
    os.utime(template, ns=(1, 1))
    (folder / "asset.1").mkdir()
    (folder / "asset.1" / "index.py").write_text("")
    # Then each change is named, and the run's message says where a test must synthesize
    assert changes(synthesized, snapshot(folder)) == [
        "added asset.1/index.py",
        "removed performance-counters.json",
        "rewritten Vigil.template.json",
    ]
    message = report(synthesized, snapshot(folder), folder)
    assert message is not None
    assert str(folder) in message and "removed performance-counters.json" in message
    assert "a folder of its own" in message
    assert changes(snapshot(folder), None) == ["the folder was removed"]


def test_the_guarded_folder_is_this_checkouts_cdk_out() -> None:
    assert Path(__file__).resolve().parents[1] / "cdk.out" == CHECKOUT_CDK_OUT

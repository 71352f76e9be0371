"""End to end on the emulated app: an observer's ``ctx.once`` effect left UNCERTAIN, settled
through the API as ``vigil observers settle`` sends it, and the next generation's answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.kinds import ticker_runs
from vigil_tools.api_client import ApiError
from vigil_tools.testing import VigilStack

PAGING_KIND = """
from pathlib import Path


def run(ctx):
    pages = Path(ctx.config["pages"])
    with ctx.once("page:incident-7") as first:
        if first:
            with pages.open("a") as sent:
                sent.write(f"{ctx.generation}\\n")
            while len(pages.read_text().split()) == 1 and not ctx.stopping:
                ctx.sleep(5)  # the first page's sender hangs before it is recorded done
    while not ctx.stopping:
        ctx.sleep(5)
"""


@pytest.fixture
def pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The deployed kind ``ticker`` runs ``paging_kind.run``, which pages once per observer
    (``ctx.once``); the file records each page with the generation that sent it."""
    with ticker_runs("paging_kind", PAGING_KIND, tmp_path, monkeypatch):
        yield tmp_path / "pages"


def _left_uncertain(vigil_stack: VigilStack, pages: Path) -> None:
    """Generation 1 pages and dies before recording it; generation 2 stops UNCERTAIN."""
    vigil_stack.create_observer("watch", "ticker", {"pages": str(pages)})
    vigil_stack.crash("watch")  # a first crash restarts at once: generation 2, which stops
    observer = vigil_stack.observer("watch")
    assert (observer.status, observer.generation) == ("FAILED", 2)
    assert observer.uncertain_effect == "page:incident-7"
    assert observer.uncertain_reason and "never recorded done" in observer.uncertain_reason
    assert pages.read_text().split() == ["1"]


def test_an_effect_settled_done_is_not_done_again_by_the_next_generation(
    vigil_stack: VigilStack, pages: Path
) -> None:
    _left_uncertain(vigil_stack, pages)

    observer = vigil_stack.settle_observer("watch", "page:incident-7", "done")

    assert (observer.status, observer.generation) == ("RUNNING", 3)
    assert (observer.uncertain_effect, observer.uncertain_reason) == (None, None)
    assert observer.effects["page:incident-7"]["state"] == "DONE"
    assert observer.effects["page:incident-7"]["settled"] is True
    assert pages.read_text().split() == ["1"]  # no second page
    with pytest.raises(ApiError) as again:
        vigil_stack.settle_observer("watch", "page:incident-7", "done")
    assert (again.value.status, again.value.code) == (409, "not_settleable")


def test_an_effect_settled_not_done_is_done_again_exactly_once(
    vigil_stack: VigilStack, pages: Path
) -> None:
    _left_uncertain(vigil_stack, pages)

    observer = vigil_stack.settle_observer("watch", "page:incident-7", "not_done")

    assert (observer.status, observer.generation) == ("RUNNING", 3)
    assert observer.effects["page:incident-7"]["state"] == "DONE"
    assert pages.read_text().split() == ["1", "3"]
    vigil_stack.crash("watch")  # a later generation finds it done: no third page
    assert vigil_stack.observer("watch").generation == 4
    assert pages.read_text().split() == ["1", "3"]

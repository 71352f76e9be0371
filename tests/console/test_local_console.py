"""``vigil local up``'s /console against requests from other web pages: a form another origin
posts (CSRF) and a page read through another host name (DNS rebinding) reach no console
function; the console's own pages, curl and the tests' clients (no Origin) still do. A fake
invoke records what would run. Pure: about 0.05 s."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from vigil_tools.local.console import LocalConsole

HOST = "127.0.0.1:4580"
RUN = {"action": "jobs.run", "job": "cleanup", "page": "jobs"}


@dataclass
class Done:
    ok: bool = True
    payload: str = "<p>page</p>"


class Invoked(list[tuple[str, dict[str, Any]]]):
    def __call__(self, function: str, event: dict[str, Any]) -> Done:
        self.append((function, event))
        return Done()


def answer(method: str, headers: dict[str, str], host: str = HOST) -> tuple[int, Invoked]:
    invoked = Invoked()
    console = LocalConsole(invoked, "view-fn", "operate-fn")
    data = {"args": json.dumps(RUN)} if method == "POST" else None
    query = None if method == "POST" else {"args": json.dumps({"page": "jobs"})}
    builder = EnvironBuilder(
        path="/console",
        method=method,
        base_url=f"http://{host}",
        data=data,
        query_string=query,
        headers=headers,
    )
    response = console.answer(Request(builder.get_environ()))
    return response.status_code, invoked


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://127.0.0.1:9999"},  # another local server
    ],
    ids=["cross-site", "origin-only", "sandboxed", "same-site", "other-port"],
)
def test_a_form_posted_from_another_origin_runs_nothing(headers: dict[str, str]) -> None:
    status, invoked = answer("POST", headers)

    assert status == 403
    assert invoked == []


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_request_through_another_host_name_is_refused(method: str) -> None:
    """DNS rebinding: evil.example resolves to 127.0.0.1, so the browser calls it same-origin."""
    status, invoked = answer(
        method, {"Origin": "http://evil.example:4580"}, host="evil.example:4580"
    )

    assert status == 403
    assert invoked == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": f"http://{HOST}", "Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # typed into the address bar
        {},  # curl, a test's client
    ],
    ids=["own-page", "address-bar", "no-browser"],
)
def test_the_consoles_own_pages_still_act(headers: dict[str, str]) -> None:
    status, invoked = answer("POST", headers)

    assert status == 200
    assert [function for function, _ in invoked] == ["operate-fn"]


def test_localhost_is_the_loopback_too() -> None:
    status, invoked = answer("GET", {}, host="localhost:4580")

    assert status == 200 and [f for f, _ in invoked] == ["view-fn"]

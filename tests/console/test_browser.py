"""The console in a real browser: headless Chromium (Debian's ``chromium`` and ``chromedriver``,
driven by selenium) loads each page of the local console (``vigil_tools.local.console``, served
on the loopback as ``vigil local up`` serves it) against the deployed example app, presses each
kind of button, confirms, and the records show the effect. Waits are on DOM conditions only.

Skipped when chromium or chromedriver is missing. With ``VIGIL_CONSOLE_SCREENSHOTS=DIR`` it saves
the screenshots the console guide shows. About 15 s.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.console.test_actions import JOB, RECEIPT, head, runs

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no chromium/chromedriver on this machine (apt-get install chromium chromium-driver)",
)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
WAIT_S = 30


@pytest.fixture
def console(vigil_stack: Any) -> Iterator[str]:
    """The local console of the deployed stack, on 127.0.0.1, one request at a time."""
    from werkzeug.serving import make_server

    from vigil_tools.local.console import PATH, LocalConsole

    names = [
        vigil_stack.account.physical_id(logical_id)
        for logical_id in vigil_stack.account.synth.resources("AWS::Lambda::Function")
    ]
    local = LocalConsole.of(
        vigil_stack.runtime.invoke, vigil_stack.account.session.client("lambda"), names
    )
    assert local is not None

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        from werkzeug.wrappers import Request, Response

        request = Request(environ)
        answer = local.answer(request) if request.path == PATH else Response(status=404)
        return answer(environ, start_response)

    server = make_server("127.0.0.1", 0, app, threaded=False)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{PATH}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,760"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class Screen:
    """The browser on the console: clicks that wait for the page they lead to."""

    def __init__(self, driver: Any, url: str) -> None:
        self.driver, self.url = driver, url
        self.shots = os.environ.get("VIGIL_CONSOLE_SCREENSHOTS")

    def until(self, condition: Callable[[Any], Any]) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT_S).until(condition)

    def text(self) -> str:
        return str(self.driver.find_element("tag name", "body").text)

    def open(self, page: str = "now") -> None:
        self.driver.get(self.url)
        self.until(lambda d: d.find_elements("css selector", ".vigil h3"))
        if page != "now":
            self.press_link(
                {"jobs": "Jobs", "tasks": "Tasks", "observers": "Observers and hosts"}[page]
            )

    def press_link(self, label: str, *, near: str | None = None) -> None:
        """Follow the link ``label`` (on the row that mentions ``near``)."""
        within = f"//tr[td[contains(., '{near}')]]" if near else ""
        path = f"{within}//a[normalize-space()='{label}']"
        self._leave(lambda: self.driver.find_element("xpath", path).click())

    def press(self, label: str, *, near: str, fill: dict[str, str] | None = None) -> str:
        """Press the button ``label`` on the row that mentions ``near``, confirm, and the text
        of the page that answers."""
        row = self.until(
            lambda d: d.find_element(
                "xpath", f"//tr[td[contains(., '{near}')]]//form[.//button[contains(., '{label}')]]"
            )
        )
        for name, value in (fill or {}).items():
            row.find_element("name", name).send_keys(value)
        self._leave(lambda: row.find_element("tag name", "button").click())
        confirm = self.driver.find_elements("id", "confirm")
        if confirm:
            self._leave(confirm[0].click)
        self.until(lambda d: d.find_elements("css selector", ".outcome"))
        return str(self.driver.find_element("css selector", ".outcome").text)

    def shot(self, name: str) -> None:
        if self.shots:
            Path(self.shots).mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(Path(self.shots) / f"console-{name}.png"))

    def _leave(self, click: Callable[[], None]) -> None:
        """Click, then wait until the page it leaves is gone (the next one has loaded)."""
        from selenium.webdriver.support import expected_conditions

        old = self.driver.find_element("tag name", "html")
        click()
        self.until(expected_conditions.staleness_of(old))
        self.until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_each_page_and_button_in_a_real_browser(
    vigil_stack: Any, console: str, browser: Any
) -> None:
    vigil_stack.enqueue(RECEIPT, {"order": "o-2"})  # no email: fails, dead-lettered
    waiting = vigil_stack.enqueue(
        RECEIPT, {"order": "o-3", "email": "a@b.c", "total": 2}, delay=timedelta(minutes=30)
    )
    vigil_stack.advance(minutes=5)
    vigil_stack.create_observer("ticker-1", "ticker")
    vigil_stack.create_observer("ticker-2", "ticker")
    screen = Screen(browser, console)

    screen.open("now")
    assert RECEIPT in screen.text() and "tasks with dead letters" in screen.text()
    screen.shot("now")

    screen.open("jobs")
    assert JOB in screen.text()
    said = screen.press("pause", near=JOB, fill={f"reason-{JOB}": "deploy freeze"})
    assert said == f"{JOB}: paused (deploy freeze)"
    assert head(vigil_stack).paused_by.startswith("console:local:local (request ")
    screen.shot("jobs")
    assert screen.press("resume", near=JOB) == f"{JOB}: resumed"
    assert screen.press("run now", near=JOB).startswith(f"{JOB}: run requested")
    vigil_stack.runtime.run_pending()
    manual = [t for t in runs(vigil_stack).history(JOB) if t.trigger == "now"]
    assert [(t.status.value, str(t.requested_by)[:19]) for t in manual] == [
        ("SUCCEEDED", "console:local:local")
    ]

    screen.open("tasks")
    assert screen.press("redrive 1", near=RECEIPT) == f"{RECEIPT}: 1 tasks sent back to the queue"
    assert vigil_stack.dead_letters(RECEIPT) == []  # back in its queue, to run again
    screen.press_link("failures", near=RECEIPT)
    screen.press_link("queued")
    screen.press_link(waiting)
    screen.shot("task")
    assert "cancel" in screen.text()
    cancel = browser.find_element("xpath", "//form[.//button[contains(., 'cancel')]]")
    screen._leave(lambda: cancel.find_element("tag name", "button").click())
    screen._leave(browser.find_element("id", "confirm").click)
    assert screen.until(lambda d: d.find_element("css selector", ".outcome")).text == (
        f"{RECEIPT} {waiting}: CANCELLED"
    )
    assert vigil_stack.task(RECEIPT, waiting).status == "CANCELLED"
    screen.shot("tasks")

    screen.open("observers")
    assert "ticker-1" in screen.text()
    screen.shot("observers")
    assert screen.press("stop", near="ticker-1").startswith("ticker-1: stop requested")
    vigil_stack.fleet.settle()
    assert vigil_stack.observer("ticker-1").status == "STOPPED"
    generation = vigil_stack.observer("ticker-2").generation
    assert screen.press("restart", near="ticker-2").startswith("ticker-2: restart requested")
    vigil_stack.fleet.settle()
    assert vigil_stack.observer("ticker-2").generation == generation + 1

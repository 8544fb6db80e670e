"""Helpers of the console tests: the console served by uvicorn on a thread, and Debian's headless Chromium.

:class:`ConsoleServer` runs :func:`odradek.console.app.create_app` on a free 127.0.0.1 port in a
daemon thread (``url``; ``stop()`` shuts it down and closes its cluster clients).
:func:`chromium` starts Debian's ``/usr/bin/chromium`` through Debian's ``/usr/bin/chromedriver``
with a fresh profile and the browser log enabled (no browser is downloaded); :func:`console_errors`
returns the SEVERE entries of that log since the last call.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from odradek.console.app import ConsoleConfig, create_app
from odradek.free_ports import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class ConsoleServer:
    def __init__(self, config: ConsoleConfig) -> None:
        self.port = free_port()
        self.app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, name="console-test", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConsoleServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the console did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def __enter__(self) -> ConsoleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def chromium(tmp_dir: str | None = None) -> WebDriver:
    options = Options()
    options.binary_location = CHROMIUM
    profile = tmp_dir or tempfile.mkdtemp(prefix="odradek-chromium-")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


@contextlib.contextmanager
def chromium_session(tmp_dir: str) -> Iterator[WebDriver]:
    """:func:`chromium` with its profile in ``tmp_dir``, quit when the block ends."""
    driver = chromium(tmp_dir)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: WebDriver) -> list[dict[str, Any]]:
    """SEVERE entries of the browser's console log since the last call."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def text_of(driver: WebDriver, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def wait_for(driver: WebDriver, condition: Any, timeout_s: float = 15.0) -> Any:
    """Poll ``condition(driver)`` until truthy; an element replaced by a navigation meanwhile
    counts as not yet, whether chromedriver reports it stale or, caught mid-navigation, as a node
    that "does not belong to the document"."""

    def checked(d: WebDriver) -> Any:
        try:
            return condition(d)
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return False
            raise

    return WebDriverWait(
        driver, timeout_s, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(checked)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)

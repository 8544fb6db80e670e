"""The console never waits on a cluster with its web loop: a "broker" that accepts connections and never
answers holds only the page that asked, which ends with an error page once the request times out, while
other pages keep answering at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from odradek.console.app import ConsoleConfig

from .console_support import ConsoleServer


@pytest.fixture(scope="module")
def black_hole() -> Iterator[str]:
    """A TCP listener that accepts connections and never reads nor writes."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def test_a_silent_broker_holds_only_its_own_page(black_hole: str) -> None:
    server = ConsoleServer(ConsoleConfig(black_hole, request_timeout_ms=3000)).start()
    try:
        results: dict[str, object] = {}

        def slow() -> None:
            t0 = time.monotonic()
            response = httpx.get(server.url + "/topics", timeout=30)
            results["status"], results["elapsed"], results["text"] = (
                response.status_code,
                time.monotonic() - t0,
                response.text,
            )

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(0.5)  # the slow page is waiting on the cluster now
        for path in ("/static/console.css", "/login", "/api/throughput"):
            t0 = time.monotonic()
            assert httpx.get(server.url + path, timeout=5).status_code == 200
            assert time.monotonic() - t0 < 2.0, path  # behind the slow page it would take its 3 s
        thread.join(30)
        assert results["status"] in (502, 504)
        assert float(results["elapsed"]) < 10  # type: ignore[arg-type]  # the 3 s request timeout, not forever
        assert "REQUEST_TIMED_OUT" in str(results["text"])
    finally:
        server.stop()

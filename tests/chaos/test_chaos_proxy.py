"""The fault proxy on real loopback sockets: a cut link is silent but open and delivers after the
heal, other links keep working, a reset is an RST, latency delays each chunk."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from chaos.proxy import FaultProxy, Route


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[tuple[FaultProxy, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.12", 0))
        port = s.getsockname()[1]
    fault_proxy = FaultProxy(
        [Route(("127.0.0.12", port), server.server_address, "b2")],  # type: ignore[arg-type]
        sources={"127.0.0.11": "b1", "127.0.0.13": "b3"},
    ).start()
    try:
        yield fault_proxy, port
    finally:
        fault_proxy.close()
        server.shutdown()
        server.server_close()


def _connect(source: str, port: int) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(1.0)
    s.connect(("127.0.0.12", port))
    return s


def _echo(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    return s.recv(100)


def test_cut_is_silent_per_link_and_heals(proxy: tuple[FaultProxy, int]) -> None:
    fault_proxy, port = proxy
    from_b1, from_b3 = _connect("127.0.0.11", port), _connect("127.0.0.13", port)
    assert _echo(from_b1, b"a") == b"a"
    fault_proxy.cut("b1", "b2")
    with pytest.raises(TimeoutError):
        _echo(from_b1, b"held")  # neither answered nor closed
    assert _echo(from_b3, b"c") == b"c"  # b3 -> b2 still works
    fault_proxy.heal()
    from_b1.settimeout(5.0)
    assert from_b1.recv(100) == b"held"  # delivered after the heal, as TCP would retransmit it
    from_b1.close()
    from_b3.close()


def test_reset_and_latency(proxy: tuple[FaultProxy, int]) -> None:
    fault_proxy, port = proxy
    s = _connect("127.0.0.11", port)
    assert _echo(s, b"x") == b"x"
    assert fault_proxy.reset("b1", "b2") == 1
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        for _ in range(3):
            if not _echo(s, b"y"):
                raise ConnectionResetError
    s.close()
    fault_proxy.slow("b1", "b2", latency_s=0.2)
    s = _connect("127.0.0.11", port)
    started = time.monotonic()
    assert _echo(s, b"z") == b"z"
    assert time.monotonic() - started >= 0.4  # 0.2 s each way
    s.close()

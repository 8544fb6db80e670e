"""``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes`` reach the accepted sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from odradek.testing import BrokerRunner


def _server_socket(broker: BrokerRunner) -> socket.socket:
    assert broker.broker is not None
    for _ in range(100):
        connections = list(broker.broker.handler.connections)
        if connections:
            assert connections[0].transport is not None
            sock = connections[0].transport.get_extra_info("socket")
            assert sock is not None
            return sock  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError("the broker has no connection")


def test_buffer_sizes_are_applied(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    broker = odradek_broker_factory(
        overrides={"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "131072"}
    )
    host, port = broker.bootstrap_servers.split(":")
    with socket.create_connection((host, int(port))):
        sock = _server_socket(broker)
        # Linux reports twice the size asked for (it reserves room for bookkeeping).
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 65536
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * 131072
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_minus_one_keeps_the_os_default(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    broker = odradek_broker_factory(overrides={"socket.receive.buffer.bytes": "-1"})
    host, port = broker.bootstrap_servers.split(":")
    with socket.socket() as plain:
        default_rcvbuf = plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    with socket.create_connection((host, int(port))):
        sock = _server_socket(broker)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 102400  # Kafka's default
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= default_rcvbuf

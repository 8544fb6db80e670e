"""Connections: socket buffer sizes reach the accepted sockets; fetches work on an event loop
without ``sendfile`` (what the socket does not take at once is then read and written)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing import BrokerRunner


def _server_socket(broker: BrokerRunner) -> socket.socket:
    assert broker.broker is not None
    for _ in range(100):
        connections = list(broker.broker.socket_server.connections)
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
    broker = odradek_broker_factory()  # both default to -1
    host, port = broker.bootstrap_servers.split(":")
    with socket.socket() as plain:
        default_sndbuf = plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        default_rcvbuf = plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    with socket.create_connection((host, int(port))):
        sock = _server_socket(broker)
        # Not pinned: the kernel's autotuning may only have grown them.
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= default_sndbuf != 2 * 102400
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= default_rcvbuf


class _NoSendfileLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``sendfile`` is not implemented (as uvloop's)."""

    async def sendfile(self, *args: Any, **kwargs: Any) -> int:
        raise NotImplementedError


class _NoSendfilePolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _NoSendfileLoop()


def test_fetch_on_a_loop_without_sendfile(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(_NoSendfilePolicy())
    try:  # a small send buffer: a fetch answer's first sendfile stops short, the loop's path sends the rest
        broker = odradek_broker_factory(overrides={"socket.send.buffer.bytes": "16384"})
    finally:
        asyncio.set_event_loop_policy(previous)
    assert isinstance(broker.loop, _NoSendfileLoop)
    topic = f"nosendfile-{uuid.uuid4().hex[:8]}"
    values = [f"{i}:".encode().ljust(1024, b"v") for i in range(400)]  # 400 KiB: fetched as file slices
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4()}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.time() + 30
    while len(got) < len(values) and time.time() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.close()
    assert got == values

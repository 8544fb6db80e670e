"""Mutated real client traffic against a broker process: it stays up, bounded, and loses nothing.

``ODRADEK_FUZZ_FRAMES`` (default 100,000) and ``ODRADEK_FUZZ_SEED`` (default fixed) size the run;
``make fuzz`` runs 1,000,000 frames with a random seed. Before the run, records are written to a
topic the corpus never names; after it, the broker must be alive, its RSS must never have
exceeded ``RSS_BOUND_BYTES``, its log must hold no traceback, every frame must have had the
outcome the codec predicts (refused frames close their connection, accepted ones are answered),
and the earlier records must read back byte for byte, beside a new produce/consume round trip.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .fuzz_support import PROBE, consume_all, run_fuzz
from .process_support import BrokerProcess

FRAMES = int(os.environ.get("ODRADEK_FUZZ_FRAMES", "100000"))
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261124"))
RSS_BOUND_BYTES = 300 * 1024 * 1024
TOPIC = "integrity-check"
# The OffsetFetch v0 request whose array count (0x7a6700ff) once made the codec ask for 16 GB.
CRASH_FRAME = bytes.fromhex(
    "000000310009000000000008000772646b61666b61000204667a6700ffffffff0203667a0400000000000000010000000200000100"
)

pytestmark = pytest.mark.timeout(max(300, FRAMES // 1000 * 3))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("fuzz") / "data"
    proc = BrokerProcess(data, {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"})
    proc.start()
    yield proc
    proc.stop()


def _produce(bootstrap: str, count: int, prefix: str) -> list[tuple[int, bytes, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent: list[tuple[int, bytes, bytes]] = []
    for i in range(count):
        key, value = f"{prefix}-{i}".encode(), os.urandom(64) + bytes([i % 256])
        producer.produce(TOPIC, value, key, partition=i % 3)
        sent.append((i % 3, key, value))
    assert producer.flush(30) == 0
    return sent


def _consume_all(bootstrap: str, expected: int) -> list[tuple[int, bytes, bytes]]:
    return consume_all(bootstrap, TOPIC, 3, expected)


def _sample_rss(broker: BrokerProcess, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set() and broker.alive():
        peak[0] = max(peak[0], broker.rss_bytes())
        stop.wait(0.1)


def _answered(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(PROBE)
        return len(s.recv(8)) == 8


def test_the_53_byte_frame_closes_its_connection_only(broker: BrokerProcess) -> None:
    bystander = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(CRASH_FRAME)
        assert s.recv(100) == b""  # closed, nothing answered
    assert broker.alive()
    bystander.sendall(PROBE)
    assert len(bystander.recv(8)) == 8
    bystander.close()
    log = broker.log_text()
    assert "Tried to allocate a collection of size 2053570815, but there are only 24 bytes remaining." in log
    assert "Traceback" not in log


def test_mutated_client_traffic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    before = _produce(broker.bootstrap_servers, 300, "before")

    stop, peak = threading.Event(), [broker.rss_bytes()]
    sampler = threading.Thread(target=_sample_rss, args=(broker, stop, peak), daemon=True)
    sampler.start()
    try:
        stats = asyncio.run(run_fuzz(broker.port, FRAMES, SEED, workers=12))
    finally:
        stop.set()
        sampler.join()

    print(
        f"fuzz: seed {SEED}, {stats.frames} frames in {stats.seconds:.1f} s over {stats.connections} connections: "
        f"{stats.closed} refused, {stats.answered} answered, {stats.silent} acks=0, {stats.slow} slow, "
        f"{stats.skipped} costly valid frames not sent; peak RSS {peak[0] / 1e6:.1f} MB"
    )
    assert broker.alive(), broker.log_text()[-3000:]
    assert stats.frames == FRAMES
    assert stats.mismatches == [], stats.mismatches[:20]
    assert stats.closed > FRAMES // 4 and stats.answered > FRAMES // 20, stats
    assert peak[0] < RSS_BOUND_BYTES, f"peak RSS {peak[0] / 1e6:.1f} MB"
    log = broker.log_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 300 : log.index("Traceback") + 3000]

    after = _produce(broker.bootstrap_servers, 30, "after")
    got = _consume_all(broker.bootstrap_servers, len(before) + len(after))
    by_partition = {p: [(k, v) for q, k, v in got if q == p] for p in range(3)}
    for p in range(3):
        assert by_partition[p] == [(k, v) for q, k, v in before + after if q == p]


def _stall(port: int, declared: int, sent: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(struct.pack(">i", declared) + b"\x00" * sent)
    return s


def _settled_rss(broker: BrokerProcess, seconds: float = 1.0) -> int:
    time.sleep(seconds)
    return broker.rss_bytes()


def test_stalled_large_frames_cost_what_they_sent(broker: BrokerProcess) -> None:
    baseline = _settled_rss(broker)
    conns = [_stall(broker.port, 100_000_000, 64 * 1024) for _ in range(100)]
    stalled = _settled_rss(broker)
    assert _answered(broker.port)
    for s in conns:
        s.close()
    deadline = time.monotonic() + 10
    after = _settled_rss(broker)
    while after - baseline > 20_000_000 and time.monotonic() < deadline:
        after = _settled_rss(broker, 0.5)
    assert stalled - baseline < 50_000_000, f"+{(stalled - baseline) / 1e6:.1f} MB with 100 stalled frames"
    assert after - baseline < 20_000_000, f"+{(after - baseline) / 1e6:.1f} MB after they closed"


def test_idle_connections_are_cheap_and_do_not_block_others(broker: BrokerProcess) -> None:
    import resource

    count = 5000
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    before = _settled_rss(broker)
    conns = [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(count)]
    try:
        t0 = time.monotonic()
        assert _answered(broker.port)
        # blocked by the idle ones it would wait for its 5 s socket timeout; a loaded 2-core
        # machine takes well under a second
        assert time.monotonic() - t0 < 3.0
        per_connection = (_settled_rss(broker) - before) / count
        assert per_connection <= 20_000, f"{per_connection / 1000:.1f} KB per idle connection"
    finally:
        for s in conns:
            s.close()


def _refused(s: socket.socket) -> bool:
    """The broker closed this new connection at once (it answers nothing)."""
    try:
        s.sendall(PROBE)
        return s.recv(8) == b""
    except ConnectionError:
        return True


def _established_to(port: int) -> int:
    """Open TCP connections accepted on ``port`` (from ``/proc/net/tcp``): the broker's own
    connections to itself (the controller's channel) count against ``max.connections``."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
            count += 1
    return count


CLIENT_IP = "127.0.0.2"  # an address of the loopback network that the broker's own connections do not use


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(CLIENT_IP, 0))


@pytest.mark.parametrize(
    ("overrides", "allowed"),
    [
        ({"max.connections.per.ip": "2"}, 2),
        ({"max.connections.per.ip": "2", "max.connections.per.ip.overrides": f"{CLIENT_IP}:4"}, 4),
        ({"max.connections": "5"}, None),
    ],
)
def test_connection_limits_refuse_past_the_limit(
    tmp_path: Path, overrides: dict[str, str], allowed: int | None
) -> None:
    proc = BrokerProcess(tmp_path / "data", overrides).start()
    try:
        deadline = time.monotonic() + 10
        while _established_to(proc.port) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the start-up probe gone, the controller's connection to itself open
        if allowed is None:
            allowed = int(overrides["max.connections"]) - _established_to(proc.port)
        conns = [_connect(proc.port) for _ in range(allowed)]
        for s in conns:
            s.sendall(PROBE)
            assert len(s.recv(8)) == 8
        extra = _connect(proc.port)
        assert _refused(extra)
        extra.close()
        conns.pop().close()
        time.sleep(0.2)
        again = _connect(proc.port)  # a slot freed
        again.sendall(PROBE)
        assert len(again.recv(8)) == 8
        again.close()
        assert f"refusing a connection from {CLIENT_IP}" in proc.log_text()
        for s in conns:
            s.close()
    finally:
        proc.stop()


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", {"connections.max.idle.ms": "600"}).start()
    try:
        idle = socket.create_connection(("127.0.0.1", proc.port), timeout=5)
        busy = socket.create_connection(("127.0.0.1", proc.port), timeout=5)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            busy.sendall(PROBE)
            (size,) = struct.unpack(">i", busy.recv(4))
            while size > 0:
                size -= len(busy.recv(size))
            time.sleep(0.1)
        idle.settimeout(2)
        assert idle.recv(10) == b""  # closed by the broker
        busy.sendall(PROBE)
        assert len(busy.recv(8)) == 8
        assert "idle for more than connections.max.idle.ms=600" in proc.log_text()
        idle.close()
        busy.close()
    finally:
        proc.stop()

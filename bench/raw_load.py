"""Raw-batch load generator: the broker's own Produce and Fetch ceiling, without a client library.

The record batch is encoded once (``odradek.protocol.records.build_batch``: ``--record-size``
byte values, as many records as fit in ``--batch-bytes``); one Produce request per partition is
encoded once (``odradek.protocol.codec.encode_request``, Produce v9, one partition, one batch)
and only its correlation id is patched per send. ``--connections`` connections each keep
``--in-flight`` requests outstanding (Kafka answers in order per connection), until
``--total-bytes`` of batches were acknowledged. Then the same for Fetch (v11, one partition per
request, ``partition_max_bytes`` = ``--fetch-bytes``) over the data just written, at offsets
known in advance (every batch holds the same number of records), so fetches are pipelined too.
Responses are read with ``asyncio.BufferedProtocol`` into one buffer per connection; Fetch
responses are walked by hand (batch headers only), never decoded record by record.

Figures (MB = 10^6 bytes):

- ``produce.mb_per_s``: bytes of record batches whose Produce response came back with error
  code 0, per second, from the first send to the last response. ``window_mb_per_s`` gives
  min/median/max over 1 s windows (how steady it was); ``request_ms`` the round trip of one
  request (queueing behind ``--in-flight`` others included).
- ``produce.log_bytes_on_disk``: size of the partitions' ``.log`` files after the run (odradek
  started here only): the data did land in the log.
- ``disk_reference_mb_per_s`` (with ``--disk-reference``): the same number of bytes written to a
  file in the same file system by this process, 1 MiB ``os.write`` calls, no fsync, before the
  broker starts: what the machine's page cache and disk sustain for a plain sequential writer, the
  ceiling for ``produce.mb_per_s``.
- ``fetch.mb_per_s``: bytes of complete record batches received in Fetch responses with error
  code 0, per second. The data was written moments before, so it is in the page cache.
- ``broker_cpu_s`` / ``client_cpu_s``: CPU seconds of the broker process and of this generator
  during the phase; ``broker_cpu_system_s`` is the broker's share spent in the kernel. The
  generator shares the machine: a ``client_cpu_s`` close to the elapsed time means the figure is
  bound by the generator, not the broker.

Any error code, out-of-order correlation id or unexpected batch aborts the run with a message
naming the request; so does a connection without progress for ``--stall-s`` seconds.

    python bench/raw_load.py [--broker odradek|tansu | --bootstrap HOST:PORT [--broker-pid PID]]
        [--total-bytes 512M] [--batch-bytes 1M] [--record-size 1024] [--partitions 8]
        [--connections 4] [--in-flight 4] [--acks 1] [--fetch-bytes 1M] [--no-fetch] [--disk-reference]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import struct
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    BrokerProcess,
    OdradekBroker,
    create_topic,
    log,
    machine_info,
    make_broker,
    percentiles,
    proc_cpu_split,
)
from odradek.protocol import codec
from odradek.protocol.messages import build, nested
from odradek.protocol.records import BATCH_HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, Record, build_batch

PRODUCE_VERSION = 9
FETCH_VERSION = 11
CLIENT_ID = "odradek-raw-load"
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_FETCH_PARTITION = struct.Struct(">ihqqqi")  # index, error, high watermark, LSO, log start, aborted count
_SENTINEL = 0x0123456789ABCDEF


def parse_size(text: str) -> int:
    """``512M``, ``4G``, ``1M``, ``1048576`` -> bytes (K/M/G are powers of 1024)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


# ---------------------------------------------------------------------------------------------
# requests


def make_batch(batch_bytes: int, record_size: int) -> tuple[bytes, int]:
    """One uncompressed v2 batch of ``record_size``-byte values, as large as fits in ``batch_bytes``."""
    value = bytes(range(256)) * (record_size // 256 + 1)
    value = value[:record_size]
    count = max(1, (batch_bytes - BATCH_HEADER_SIZE) // (record_size + 8))
    while True:
        batch = build_batch([Record(None, value) for _ in range(count)])
        if len(batch) <= batch_bytes or count == 1:
            return batch, count
        count -= max(1, (len(batch) - batch_bytes) // (record_size + 8))


def produce_request(topic: str, partition: int, batch: bytes, acks: int) -> bytes:
    """A complete Produce v9 frame (size prefix included) carrying ``batch`` to one partition."""
    schema = codec.api_schema(0, PRODUCE_VERSION)
    req_type = schema.request_type
    pdata = build(nested(req_type, "PartitionProduceData"), index=partition, records=batch)
    tdata = build(nested(req_type, "TopicProduceData"), name=topic, partition_data=(pdata,))
    request = build(
        req_type,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(tdata,),
    )
    return codec.encode_request(schema, 0, CLIENT_ID, request)


def fetch_request_template(topic: str, partition: int, fetch_bytes: int) -> tuple[bytes, int]:
    """A Fetch v11 frame for one partition and where its 8-byte ``fetch_offset`` sits in it."""
    schema = codec.api_schema(1, FETCH_VERSION)
    req_type = schema.request_type
    part = build(
        nested(req_type, "FetchPartition"),
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=_SENTINEL,
        log_start_offset=-1,
        partition_max_bytes=fetch_bytes,
    )
    request = build(
        req_type,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=fetch_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(build(nested(req_type, "FetchTopic"), topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    frame = codec.encode_request(schema, 0, CLIENT_ID, request)
    pos = frame.index(_SENTINEL.to_bytes(8, "big"))
    return frame, pos


class RunError(RuntimeError):
    """The broker answered with an error, out of order, or not at all."""


# ---------------------------------------------------------------------------------------------
# pipelined connection


@dataclass
class Work:
    """One request to send: its frame (any correlation id), and what the response handler needs."""

    frame: bytes | bytearray
    meta: Any
    patch: tuple[int, bytes] | None = None  # (position, bytes) written into the frame before sending


class PipelinedConnection(asyncio.BufferedProtocol):
    """Keeps ``in_flight`` requests outstanding, taking new ones from a shared iterator.

    The frame's correlation id (bytes 8..12 after the size prefix) is written per send; the
    response frame (without its size prefix) goes to ``on_response(meta, view, sent_at)``, a
    memoryview valid only during the call. ``done`` resolves when the iterator is exhausted and
    every response arrived, or fails with the first error.
    """

    def __init__(
        self,
        name: str,
        work: Iterator[Work],
        in_flight: int,
        on_response: Callable[[Any, memoryview, float], None],
        buffer_bytes: int,
    ) -> None:
        self.name = name
        self.work = work
        self.in_flight = in_flight
        self.on_response = on_response
        self.buf = bytearray(buffer_bytes)
        self.start = 0
        self.filled = 0
        self.correlation_id = 0
        self.outstanding: deque[tuple[int, Any, float, str]] = deque()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_progress = time.monotonic()
        self.responses = 0

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._fill()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            pending = f"{len(self.outstanding)} requests outstanding"
            self.fail(RunError(f"{self.name}: connection closed by the broker ({exc or 'EOF'}); {pending}"))

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self.filled < 65536:
            self._compact(65536)
        return memoryview(self.buf)[self.filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        buf = self.buf
        try:
            while self.filled - self.start >= 4:
                (size,) = _I32.unpack_from(buf, self.start)
                end = self.start + 4 + size
                if end > self.filled:
                    if 4 + size > len(buf) - self.start:
                        self._compact(4 + size)
                    break
                with memoryview(buf)[self.start + 4 : end] as frame:
                    self._response(frame)
                self.start = end
                buf = self.buf
            if self.start == self.filled:
                self.start = self.filled = 0
        except RunError as exc:
            self.fail(exc)
            return
        except Exception as exc:  # a response the handler could not read
            self.fail(RunError(f"{self.name}: unreadable response: {exc!r}"))
            return
        self._fill()

    # internals

    def _compact(self, need: int) -> None:
        """Move the unread bytes to the front; allocate a larger buffer if ``need`` more bytes won't fit."""
        unread = self.filled - self.start
        if unread + need > len(self.buf):
            new = bytearray(max(2 * len(self.buf), unread + need))
            new[:unread] = self.buf[self.start : self.filled]
            self.buf = new  # the old buffer may still be exported by the transport: never resize it
        elif self.start:
            self.buf[:unread] = self.buf[self.start : self.filled]
        self.start, self.filled = 0, unread

    def _response(self, frame: memoryview) -> None:
        (correlation_id,) = _I32.unpack_from(frame, 0)
        if not self.outstanding:
            raise RunError(f"{self.name}: response with correlation id {correlation_id} to no request")
        expected, meta, sent_at, what = self.outstanding.popleft()
        if correlation_id != expected:
            raise RunError(f"{self.name}: response correlation id {correlation_id}, expected {expected} ({what})")
        self.on_response(meta, frame, sent_at)
        self.responses += 1
        self.last_progress = time.monotonic()

    def _fill(self) -> None:
        assert self.transport is not None
        while len(self.outstanding) < self.in_flight and not self.done.done():
            item = next(self.work, None)
            if item is None:
                if not self.outstanding:
                    self.done.set_result(None)
                return
            self.correlation_id += 1
            frame = item.frame
            head = bytearray(frame[:12])
            _I32.pack_into(head, 8, self.correlation_id)
            tail = memoryview(frame)[12:] if item.patch is None else _patched_tail(frame, item.patch)
            self.outstanding.append((self.correlation_id, item.meta, time.perf_counter(), _describe(frame)))
            self.transport.write(head)
            self.transport.write(tail)

    def fail(self, exc: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()


def _patched_tail(frame: bytes | bytearray, patch: tuple[int, bytes]) -> bytearray:
    tail = bytearray(memoryview(frame)[12:])
    pos, data = patch
    tail[pos - 12 : pos - 12 + len(data)] = data
    return tail


def _describe(frame: bytes | bytearray) -> str:
    api_key, version = struct.unpack_from(">hh", frame, 4)
    return {0: "Produce", 1: "Fetch"}.get(api_key, str(api_key)) + f" v{version}"


async def run_pipelines(
    bootstrap: str,
    work: Iterator[Work],
    connections: int,
    in_flight: int,
    on_response: Callable[[Any, memoryview, float], None],
    buffer_bytes: int,
    stall_s: float,
) -> None:
    """Run ``connections`` pipelined connections over one shared ``work`` iterator until it is done."""
    loop = asyncio.get_running_loop()
    host, port = bootstrap.rsplit(":", 1)
    conns: list[PipelinedConnection] = []
    try:
        for i in range(connections):
            conn = PipelinedConnection(f"connection {i}", work, in_flight, on_response, buffer_bytes)
            await loop.create_connection(lambda c=conn: c, host, int(port))
            conns.append(conn)
        pending = {c.done for c in conns}
        while pending:
            finished, pending = await asyncio.wait(pending, timeout=1.0, return_when=asyncio.FIRST_EXCEPTION)
            for f in finished:
                f.result()  # raises the connection's error
            now = time.monotonic()
            for c in conns:
                if not c.done.done() and c.outstanding and now - c.last_progress > stall_s:
                    _, _, _, what = c.outstanding[0]
                    raise RunError(
                        f"{c.name}: no response for {now - c.last_progress:.0f} s; oldest outstanding request "
                        f"{what} correlation id {c.outstanding[0][0]}, {len(c.outstanding)} outstanding, "
                        f"{c.responses} answered before"
                    )
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()


# ---------------------------------------------------------------------------------------------
# phases


@dataclass
class Meter:
    """Bytes acknowledged over time, request round trips, and per-second windows."""

    t0: float = 0.0
    bytes: int = 0
    requests: int = 0
    rtts: list[float] = field(default_factory=list)
    window_start: float = 0.0
    window_bytes: int = 0
    windows: list[float] = field(default_factory=list)

    def start(self) -> None:
        self.t0 = self.window_start = time.perf_counter()

    def add(self, nbytes: int, sent_at: float) -> None:
        now = time.perf_counter()
        self.bytes += nbytes
        self.requests += 1
        self.rtts.append(now - sent_at)
        self.window_bytes += nbytes
        if now - self.window_start >= 1.0:
            self.windows.append(self.window_bytes / (now - self.window_start) / 1e6)
            self.window_start, self.window_bytes = now, 0

    def summary(self, elapsed: float) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bytes": self.bytes,
            "requests": self.requests,
            "seconds": round(elapsed, 3),
            "mb_per_s": round(self.bytes / elapsed / 1e6, 1),
            "requests_per_s": round(self.requests / elapsed),
            "request_ms": {k: round(v * 1000, 2) for k, v in percentiles(self.rtts, (50, 99)).items()},
        }
        if self.windows:
            ws = sorted(self.windows)
            out["window_mb_per_s"] = {
                "min": round(ws[0], 1),
                "p50": round(ws[len(ws) // 2], 1),
                "max": round(ws[-1], 1),
                "windows": len(ws),
            }
        return out


@dataclass
class Options:
    total_bytes: int = 512 << 20
    batch_bytes: int = 1 << 20
    record_size: int = 1024
    partitions: int = 8
    connections: int = 4
    in_flight: int = 4
    acks: int = 1
    fetch_bytes: int = 1 << 20
    fetch: bool = True
    stall_s: float = 60.0


def _cpu(pid: int | None) -> tuple[float, float]:
    return proc_cpu_split(pid) if pid else (float("nan"), float("nan"))


def _cpu_figures(pid: int | None, before: tuple[float, float], client_before: float) -> dict[str, float]:
    user, system = _cpu(pid)
    return {
        "broker_cpu_s": round(user + system - sum(before), 2),
        "broker_cpu_system_s": round(system - before[1], 2),
        "client_cpu_s": round(time.process_time() - client_before, 2),
    }


async def produce_phase(bootstrap: str, pid: int | None, topic: str, o: Options) -> tuple[dict, list[int], int]:
    """Send ``total_bytes`` of batches; returns the summary, batches acknowledged per partition, records/batch."""
    batch, records_per_batch = make_batch(o.batch_bytes, o.record_size)
    frames = [produce_request(topic, p, batch, o.acks) for p in range(o.partitions)]
    n_batches = max(1, o.total_bytes // len(batch))
    acked = [0] * o.partitions
    meter = Meter()

    def work() -> Iterator[Work]:
        for i in range(n_batches):
            p = i % o.partitions
            yield Work(frames[p], p)

    def on_response(partition: int, frame: memoryview, sent_at: float) -> None:
        _, response = codec.decode_response(0, PRODUCE_VERSION, frame.toreadonly())
        for topic_response in response.responses:
            for pr in topic_response.partition_responses:
                if pr.error_code != 0:
                    raise RunError(
                        f"Produce to {topic_response.name}-{pr.index}: error {pr.error_code!s} "
                        f"({pr.error_message or 'no message'})"
                    )
                acked[pr.index] += 1
        meter.add(len(batch), sent_at)

    cpu0, client0 = _cpu(pid), time.process_time()
    meter.start()
    await run_pipelines(bootstrap, work(), o.connections, o.in_flight, on_response, 1 << 20, o.stall_s)
    elapsed = time.perf_counter() - meter.t0
    summary = meter.summary(elapsed)
    summary.update(_cpu_figures(pid, cpu0, client0))
    summary["batch"] = {"bytes": len(batch), "records": records_per_batch, "record_bytes": o.record_size}
    return summary, acked, records_per_batch


async def fetch_phase(
    bootstrap: str, pid: int | None, topic: str, o: Options, acked: list[int], records_per_batch: int, batch_len: int
) -> dict:
    """Fetch everything the produce phase wrote, pipelined at precomputed offsets."""
    per_fetch = max(1, o.fetch_bytes // batch_len)  # whole batches per response
    templates = [fetch_request_template(topic, p, per_fetch * batch_len) for p in range(o.partitions)]
    meter = Meter()
    records = excess = 0

    def work() -> Iterator[Work]:
        rounds = max(-(-a // per_fetch) for a in acked)
        for j in range(rounds):
            for p in range(o.partitions):
                if j * per_fetch < acked[p]:
                    offset = j * per_fetch * records_per_batch
                    end = min(j + per_fetch, acked[p]) * records_per_batch
                    frame, pos = templates[p]
                    yield Work(frame, (p, offset, end), (pos, offset.to_bytes(8, "big")))

    def on_response(meta: tuple[int, int, int], frame: memoryview, sent_at: float) -> None:
        nonlocal records, excess
        partition, offset, end = meta
        got_bytes, got_records, extra = _walk_fetch_response(frame, topic, partition, offset, end)
        records += got_records
        excess += extra
        meter.add(got_bytes, sent_at)

    cpu0, client0 = _cpu(pid), time.process_time()
    meter.start()
    buffer_bytes = 2 * (per_fetch * batch_len) + (1 << 20)
    await run_pipelines(bootstrap, work(), o.connections, o.in_flight, on_response, buffer_bytes, o.stall_s)
    elapsed = time.perf_counter() - meter.t0
    summary = meter.summary(elapsed)
    summary["records"] = records
    expected = sum(acked) * records_per_batch
    if records != expected:
        summary["missing_records"] = expected - records
    if excess:
        summary["bytes_past_requested_range"] = excess
    summary.update(_cpu_figures(pid, cpu0, client0))
    return summary


def _walk_fetch_response(frame: memoryview, topic: str, partition: int, offset: int, end: int) -> tuple[int, int, int]:
    """(bytes, records, bytes past ``end``) of the complete batches in a Fetch v11 response frame.

    Only batches below offset ``end`` count: the next pipelined request asks for those above (a
    broker may return more than ``partition_max_bytes``; Kafka returns at most one batch more).

    Layout after the correlation id: throttle_time_ms i32, error_code i16, session_id i32,
    [topic string, [partition_index i32, error_code i16, high_watermark i64, last_stable_offset i64,
    log_start_offset i64, aborted_transactions nullable array, preferred_read_replica i32,
    records nullable bytes]].
    """
    (error,) = _I16.unpack_from(frame, 8)
    if error:
        raise RunError(f"Fetch {topic}-{partition}@{offset}: top-level error {error}")
    pos = 14
    (n_topics,) = _I32.unpack_from(frame, pos)
    pos += 4
    total_bytes = total_records = total_excess = 0
    for _ in range(n_topics):
        (name_len,) = _I16.unpack_from(frame, pos)
        pos += 2 + name_len
        (n_parts,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(n_parts):
            index, error, _hw, _lso, _ls, n_aborted = _FETCH_PARTITION.unpack_from(frame, pos)
            pos += _FETCH_PARTITION.size + 16 * max(n_aborted, 0) + 4  # aborted txns, preferred replica
            (size,) = _I32.unpack_from(frame, pos)
            pos += 4
            if error:
                raise RunError(f"Fetch {topic}-{index}@{offset}: error {error}")
            if size <= 0:
                raise RunError(f"Fetch {topic}-{index}@{offset}: no records (high watermark {_hw})")
            b, r, x = _walk_batches(frame[pos : pos + size], offset, end, f"{topic}-{index}")
            total_bytes += b
            total_records += r
            total_excess += x
            pos += size
    return total_bytes, total_records, total_excess


def _walk_batches(records: memoryview, offset: int, end: int, where: str) -> tuple[int, int, int]:
    """(bytes, records) of the complete batches in ``records`` below offset ``end``, and bytes past it."""
    pos = counted = count = 0
    while pos + BATCH_HEADER_SIZE <= len(records):
        base_offset, batch_length, *_rest, n = HEADER_STRUCT.unpack_from(records, pos)
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_end > len(records):
            break  # a partial batch at the end of the response (allowed by the protocol)
        if pos == 0 and base_offset != offset:
            raise RunError(f"Fetch {where}@{offset}: first batch has base offset {base_offset}")
        if base_offset < end:
            count += n
            counted = batch_end
        pos = batch_end
    return counted, count, pos - counted


def disk_write_reference(directory: str, total_bytes: int) -> float:
    """MB/s of writing ``total_bytes`` to a new file in ``directory`` with 1 MiB writes (no fsync)."""
    chunk = bytes(range(256)) * 4096
    fd, path = tempfile.mkstemp(prefix="odradek-bench-disk-", dir=directory)
    try:
        t0 = time.perf_counter()
        written = 0
        while written < total_bytes:
            written += os.write(fd, chunk)
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return round(written / elapsed / 1e6, 1)


def log_bytes_on_disk(broker: BrokerProcess | None, topic: str) -> int | None:
    if not isinstance(broker, OdradekBroker):
        return None
    return sum(f.stat().st_size for f in Path(broker.data_dir).glob(f"{topic}-*/*.log"))


def run(bootstrap: str, pid: int | None, o: Options, broker: BrokerProcess | None = None) -> dict[str, Any]:
    """Produce, then (unless ``o.fetch`` is false) fetch; the JSON-ready result."""
    topic = f"raw-{int(time.time() * 1000) % 10**8}"
    create_topic(bootstrap, topic, o.partitions)
    log(f"  raw produce: {o.total_bytes / 1e6:.0f} MB to {topic}")
    produce, acked, records_per_batch = asyncio.run(produce_phase(bootstrap, pid, topic, o))
    produce["log_bytes_on_disk"] = log_bytes_on_disk(broker, topic)
    result: dict[str, Any] = {"produce": produce}
    if o.fetch:
        log("  raw fetch")
        batch_len = produce["batch"]["bytes"]
        result["fetch"] = asyncio.run(fetch_phase(bootstrap, pid, topic, o, acked, records_per_batch, batch_len))
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-bytes", type=parse_size, default=Options.total_bytes, help="bytes to produce")
    parser.add_argument("--batch-bytes", type=parse_size, default=Options.batch_bytes, help="size of one batch")
    parser.add_argument("--record-size", type=parse_size, default=Options.record_size, help="value size")
    parser.add_argument("--partitions", type=int, default=Options.partitions)
    parser.add_argument("--connections", type=int, default=Options.connections)
    parser.add_argument("--in-flight", type=int, default=Options.in_flight, help="requests in flight per connection")
    parser.add_argument("--acks", type=int, default=Options.acks, choices=(1, -1))
    parser.add_argument("--fetch-bytes", type=parse_size, default=Options.fetch_bytes, help="max bytes per fetch")
    parser.add_argument("--no-fetch", dest="fetch", action="store_false")
    parser.add_argument(
        "--stall-s", type=float, default=Options.stall_s, help="give up after this long without a response"
    )


def options_from_args(args: argparse.Namespace) -> Options:
    return Options(
        total_bytes=args.total_bytes,
        batch_bytes=args.batch_bytes,
        record_size=args.record_size,
        partitions=args.partitions,
        connections=args.connections,
        in_flight=args.in_flight,
        acks=args.acks,
        fetch_bytes=args.fetch_bytes,
        fetch=args.fetch,
        stall_s=args.stall_s,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="odradek", help="broker to start: odradek or tansu")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--broker-pid", type=int, help="pid of the running broker (for CPU figures)")
    parser.add_argument("--data-dir", help="odradek's log.dirs (default: a fresh temporary directory)")
    parser.add_argument("--disk-reference", action="store_true", help="first time a plain sequential write")
    add_arguments(parser)
    args = parser.parse_args(argv)
    o = options_from_args(args)
    out: dict[str, Any] = {"machine": machine_info(), "settings": o.__dict__}
    if args.disk_reference:
        directory = str(Path(args.data_dir).parent) if args.data_dir else tempfile.gettempdir()
        log(f"  plain write of {o.total_bytes / 1e6:.0f} MB to {directory}")
        out["disk_reference_mb_per_s"] = disk_write_reference(directory, o.total_bytes)
    try:
        if args.bootstrap:
            out["broker"] = args.bootstrap
            out.update(run(args.bootstrap, args.broker_pid, o))
        else:
            kwargs = {"data_dir": args.data_dir} if args.data_dir and args.broker == "odradek" else {}
            with make_broker(args.broker, **kwargs) as broker:
                log(f"{args.broker} ready in {broker.ready_s:.3f} s on {broker.bootstrap_servers}")
                out["broker"] = args.broker
                out.update(run(broker.bootstrap_servers, broker.pid, o, broker))
                out["broker_peak_rss_mb"] = round(broker.peak_rss_bytes() / 1e6, 1)
    except RunError as exc:
        out["error"] = str(exc)
        print(json.dumps(out, indent=2))
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

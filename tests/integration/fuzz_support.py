"""A mutation fuzzer fed with real client traffic, and the oracle that says what the broker must do.

Corpus: ``tests/data/client_frames/<client>.bin`` (request frames recorded from confluent-kafka,
kafka-python and aiokafka by ``tools/record_traffic.py``). :class:`Mutator` derives frames from
them with one or more of: bit flips, random bytes, truncation, inserted or deleted bytes, a 2- or
4-byte field (or a varint) overwritten with a length Kafka's readers must refuse or bound (-1,
-2, 0, 0x7fff, 0x7fffffff, 0x80000000, random large), api key / version swapped, and (rarely)
a size prefix of 0, negative or above ``socket.request.max.bytes``. Every other frame keeps a
size prefix equal to its body's length, so one frame's fate does not depend on the next.

Oracle (:func:`predict`): the broker's own codec decides, as the request handler does, whether a
frame is refused (the connection must close), answered, or silent (Produce with acks=0).
:func:`run_fuzz` drives ``workers`` connections concurrently, sends each mutated frame (followed
by an ApiVersions probe when no answer is expected), and counts frames whose outcome differs from
the prediction. Frames the codec accepts for APIs that change cluster state at a cost
(CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DeleteGroups, AlterConfigs,
IncrementalAlterConfigs) are not sent, so a run does not spend its time creating topics;
malformed ones are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import random
import struct
import time
from collections.abc import Awaitable, Callable

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, parse_request_header, peek_api
from odradek.server.apis import API_HANDLERS

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "data" / "client_frames"
SASL_CORPUS = CORPUS.with_name("client_frames_sasl")
"""The same clients' frames over authenticated SASL_PLAINTEXT connections (``tools/record_sasl_traffic.py``):
SaslHandshake and SaslAuthenticate (PLAIN, SCRAM-SHA-256/512) first on each connection."""
MAX_REQUEST_BYTES = 104857600
SKIPPED_WHEN_VALID = {19, 20, 37, 21, 42, 33, 44, 4, 5, 6, 7, 43, 30, 31, 51}
"""API keys whose valid requests change cluster state (create/delete topics, partitions, records,
groups, configs, ACLs, SCRAM credentials) or are the controller's own (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown, ElectLeaders: a client may send them, as to Kafka without an authorizer, and
a valid one would rewrite who leads what): mutations that stay valid are counted, not sent."""
PROBE_CORRELATION_ID = 0x7FFF0001
PROBE = struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 0, PROBE_CORRELATION_ID, -1)
LENGTH_VALUES_16 = (-1, -2, 0, 0x7FFF, -0x8000, 1)
LENGTH_VALUES_32 = (-1, -2, 0, 0x7FFFFFFF, -0x80000000, 0x7A6700FF, 0x01000000, 65536)
HUGE_VARINTS = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x01", b"\x00", b"\x01")


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[int, bytes, bytes]]:
    """``(partition, key, value)`` of the records of ``topic`` from offset 0, until ``expected``
    arrived or 30 s passed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.key(), msg.value()))
    consumer.close()
    return got


def load_corpus(directory: pathlib.Path = CORPUS) -> list[bytes]:
    """Every recorded frame (size prefix included) of every client file."""
    frames: list[bytes] = []
    for path in sorted(directory.glob("*.bin")):
        data = path.read_bytes()
        pos = 0
        while pos + 4 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos)
            frames.append(data[pos + 4 : pos + 4 + length])
            pos += 4 + length
    return frames


class Mutator:
    """Mutated copies of corpus frames; deterministic for a given seed."""

    def __init__(self, corpus: list[bytes], seed: int) -> None:
        self.bodies = [f[4:] for f in corpus]
        self.rng = random.Random(seed)
        self.served = sorted(API_HANDLERS)

    def next_frame(self) -> bytes:
        rng = self.rng
        body = bytearray(rng.choice(self.bodies))
        if rng.random() < 0.02:  # a size prefix the framing must refuse at once
            size = rng.choice((0, -1, -(2**31), MAX_REQUEST_BYTES + 1, 2**31 - 1))
            return struct.pack(">i", size) + bytes(body[: rng.randint(0, 64)])
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            self._mutate(body)
        return struct.pack(">i", len(body)) + bytes(body)

    def _mutate(self, body: bytearray) -> None:
        rng = self.rng
        n = len(body)
        kind = rng.randrange(9)
        if n == 0:
            body.extend(rng.randbytes(rng.randint(1, 12)))
        elif kind == 0:  # bit flips
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif kind == 1:  # random bytes
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(n)] = rng.randrange(256)
        elif kind == 2:  # truncation
            del body[rng.randrange(n) :]
        elif kind == 3:  # insertion
            at = rng.randrange(n + 1)
            body[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == 4:  # deletion
            at = rng.randrange(n)
            del body[at : at + rng.randint(1, 16)]
        elif kind in (5, 6):  # a 32- or 16-bit length field
            width, values, fmt = (4, LENGTH_VALUES_32, ">i") if kind == 5 else (2, LENGTH_VALUES_16, ">h")
            if n >= width:
                value = rng.choice(values) if rng.random() < 0.8 else rng.randrange(-(2 ** (8 * width - 1)), 0)
                struct.pack_into(fmt, body, rng.randrange(n - width + 1), value)
        elif kind == 7:  # a varint (compact lengths, tag counts)
            at = rng.randrange(n)
            body[at : at + rng.randint(0, 2)] = rng.choice(HUGE_VARINTS)
        elif n >= 4:  # api key and version
            key = rng.choice(self.served) if rng.random() < 0.7 else rng.randrange(-5, 80)
            struct.pack_into(">hh", body, 0, key, rng.randrange(-2, 20))


def predict(body: bytes) -> str:
    """``close``, ``answer`` or ``silent``: what the broker must do with this request body."""
    try:
        api_key, version, _ = peek_api(body)
    except InvalidRequestError:
        return "close"
    module = API_HANDLERS.get(api_key)
    if module is None:
        return "close"
    if not module.MIN_VERSION <= version <= module.MAX_VERSION:
        return "answer" if api_key == ApiKey.API_VERSIONS else "close"
    try:
        schema = api_schema(api_key, version)
        header = parse_request_header(body, schema.flexible)
        request = decode_request(schema, body, header.size)
    except (InvalidRequestError, UnsupportedVersionError):
        return "close"
    if api_key in SKIPPED_WHEN_VALID:
        return "skip"
    if api_key == 0 and request.acks == 0:
        return "silent"
    return "answer"


@dataclasses.dataclass
class FuzzStats:
    frames: int = 0
    closed: int = 0
    answered: int = 0
    silent: int = 0
    skipped: int = 0
    slow: int = 0
    connections: int = 0
    mismatches: list[str] = dataclasses.field(default_factory=list)
    by_prediction: dict[str, int] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
"""Opens one connection, ready for requests (e.g. authenticated on a SASL listener)."""


async def close_quietly(writer: asyncio.StreamWriter | None) -> None:
    """Close a fuzzing connection (if open), ignoring what the broker did to it."""
    if writer is not None:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


async def _worker(
    port: int, mutator: Mutator, budget: list[int], stats: FuzzStats, timeout: float, connect: Connect | None = None
) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None

    async def drop() -> None:
        nonlocal reader, writer
        await close_quietly(writer)
        reader = writer = None

    try:
        while budget[0] > 0:
            frame = mutator.next_frame()
            (size,) = struct.unpack_from(">i", frame, 0)
            outcome = "close" if size <= 0 or size > MAX_REQUEST_BYTES else predict(frame[4:])
            if outcome == "skip":
                stats.skipped += 1
                continue
            budget[0] -= 1
            stats.frames += 1
            stats.by_prediction[outcome] = stats.by_prediction.get(outcome, 0) + 1
            if writer is None:
                reader, writer = await (connect() if connect else asyncio.open_connection("127.0.0.1", port))
                stats.connections += 1
            assert reader is not None
            writer.write(frame if outcome != "silent" else frame + PROBE)
            try:
                if outcome == "close":
                    data = await asyncio.wait_for(reader.read(65536), timeout)
                    if data:
                        stats.mismatches.append(f"answered a frame that must be refused: {frame[:64].hex()}")
                    else:
                        stats.closed += 1
                    await drop()
                    continue
                response = await asyncio.wait_for(_read_frame(reader), timeout)
                if outcome == "silent":
                    (cid,) = struct.unpack_from(">i", response, 0)
                    if cid != PROBE_CORRELATION_ID:
                        stats.mismatches.append(f"answered an acks=0 produce: {frame[:64].hex()}")
                    stats.silent += 1
                else:
                    stats.answered += 1
            except TimeoutError:
                stats.slow += 1  # a long poll or a join waiting for a rebalance: not an error
                await drop()
            except (asyncio.IncompleteReadError, ConnectionError):
                if outcome == "close":
                    stats.closed += 1
                else:
                    stats.mismatches.append(f"closed on a frame the codec accepts ({outcome}): {frame[:64].hex()}")
                await drop()
    finally:
        await drop()


async def run_fuzz(
    port: int,
    frames: int,
    seed: int,
    workers: int = 8,
    timeout: float = 0.5,
    connect: Connect | None = None,
    corpus: list[bytes] | None = None,
) -> FuzzStats:
    """Send ``frames`` mutated frames to the broker on ``port`` from ``workers`` connections, each
    opened by ``connect`` when given (an authenticated connection), else a plain TCP one; mutated
    from ``corpus`` (default: :data:`CORPUS`)."""
    corpus = load_corpus() if corpus is None else corpus
    mutator = Mutator(corpus, seed)
    stats = FuzzStats()
    budget = [frames]
    t0 = time.perf_counter()
    await asyncio.gather(*(_worker(port, mutator, budget, stats, timeout, connect) for _ in range(workers)))
    stats.seconds = time.perf_counter() - t0
    return stats

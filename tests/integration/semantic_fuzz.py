"""A semantic fuzzer: recorded client requests, decoded, with one field at a time set to a value
that sizes work or memory rather than bytes on the wire.

Seeds: every request of the recorded corpora (``tests/data/client_frames`` and
``tests/data/client_frames_sasl``: SaslHandshake and SaslAuthenticate included) decoded with the
broker's codec, one seed per (API key, version); for a served API no client recorded (the
controller's APIs, ACLs, quotas, SCRAM credentials, reassignments, ...) a request built from its
newest schema with neutral values (0, ``"x"``, empty arrays, no nulls).

Mutations (:func:`mutations`), for every field of a seed, nested ones through the first entry of
each array:

- integers (i8 .. i64, unsigned ones): 0, -1, 1, the type's max and min, and a huge value
  (2**31 - 1 capped to the type);
- timeouts (``i32Timedelta``/``i64Timedelta``): 0, -1 ms, 2**31 - 1 ms, the min;
- arrays: empty, and ``THOUSANDS`` copies of the first entry (or of a neutral one):
  ``ODRADEK_SEMANTIC_ARRAY``, 1,000 in the suite, 3,000 in ``make fuzz``;
- strings: empty, ``HUGE_STRING`` characters, and invalid UTF-8 (the encoded field's bytes
  replaced by 0xff after encoding, so lengths stay right), null where nullable;
- booleans flipped, UUIDs zero and random, bytes empty and 30,000 bytes.

Every mutated request is encoded with its seed's version and sent as its own frame; the oracle is
only that the broker answers (the response carries the frame's correlation id) or closes the
connection; a Produce with acks=0 is followed by an ApiVersions probe that must be answered.
No answer within ``timeout`` counts as slow (allowed for the APIs that wait by design: Fetch, ShareFetch,
JoinGroup, SyncGroup). Deterministic for a given seed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import random
import struct
import time
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

from kio.static.primitive import Records

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, encode_request, parse_request_header, peek_api
from odradek.server.apis import API_HANDLERS

from .fuzz_support import PROBE, PROBE_CORRELATION_ID, SASL_CORPUS, close_quietly, load_corpus

THOUSANDS = int(os.environ.get("ODRADEK_SEMANTIC_ARRAY", "1000"))
HUGE_STRING = 30000
BAD_UTF8_MARK = "Zq7Xw9Kp3Vb1Ym5N"
"""Stands for a string whose bytes become invalid UTF-8 once encoded (same length, all 0xff)."""
WAITING_APIS = frozenset({ApiKey.FETCH, ApiKey.SHARE_FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP})
"""APIs whose answer may come after a wait the request asks for (long poll, rebalance)."""

Path = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class Seed:
    api_key: int
    version: int
    client_id: str | None
    request: Any


@dataclasses.dataclass(frozen=True)
class Mutation:
    seed: Seed
    path: Path
    label: str
    value: Any

    @property
    def field(self) -> str:
        """``api/field.path`` with array indexes left out: what the coverage counts."""
        return f"{ApiKey(self.seed.api_key).name}/" + ".".join(p for p in self.path if isinstance(p, str))


def _plain(t: Any) -> tuple[Any, bool]:
    """``(type, nullable)`` of a field annotation (``X | None`` -> ``(X, True)``)."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0], True
    return t, False


def _element(t: Any) -> Any | None:
    """The entry type of an array annotation ``tuple[X, ...]``, else None."""
    if typing.get_origin(t) is tuple:
        return typing.get_args(t)[0]
    return None


def neutral(t: Any) -> Any:
    """A neutral value of annotation ``t``: 0, ``"x"``, empty arrays, nested entities built likewise."""
    t, _ = _plain(t)
    if _element(t) is not None:
        return ()
    if dataclasses.is_dataclass(t) and isinstance(t, type):
        return t(**{f.name: neutral(f.type) for f in dataclasses.fields(t)})
    if isinstance(t, type):
        if issubclass(t, bool):
            return False
        if issubclass(t, int):
            return 0
        if issubclass(t, float):
            return 0.0
        if issubclass(t, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(t, datetime.datetime):
            return datetime.datetime.fromtimestamp(0, datetime.UTC)
        if issubclass(t, uuid.UUID):
            return uuid.UUID(int=0)
        if issubclass(t, str):
            return "x"
        if issubclass(t, bytes):
            return b""
    raise TypeError(f"no neutral value for {t!r}")


def load_seeds() -> list[Seed]:
    """One decoded request per (API key, version) of the corpora, plus a neutral one per API no
    client recorded."""
    seeds: dict[tuple[int, int], Seed] = {}
    for frame in load_corpus() + load_corpus(SASL_CORPUS):
        body = frame[4:]
        api_key, version, _ = peek_api(body)
        if (api_key, version) in seeds or api_key not in API_HANDLERS:
            continue
        try:
            schema = api_schema(api_key, version)
            header = parse_request_header(body, schema.flexible)
            request = decode_request(schema, body, header.size)
        except (InvalidRequestError, UnsupportedVersionError):
            continue
        seeds[(api_key, version)] = Seed(api_key, version, header.client_id, request)
    recorded = {k for k, _ in seeds}
    for api_key, module in sorted(API_HANDLERS.items()):
        if api_key not in recorded:
            schema = api_schema(api_key, module.MAX_VERSION)
            seeds[(api_key, module.MAX_VERSION)] = Seed(
                api_key, module.MAX_VERSION, "semantic-fuzz", neutral(schema.request_type)
            )
    return list(seeds.values())


def _int_values(t: type) -> list[tuple[str, int]]:
    low, high = getattr(t, "__low__", -(2**31)), getattr(t, "__high__", 2**31 - 1)
    values = [("0", 0), ("-1", -1), ("1", 1), ("max", high), ("min", low), ("huge", min(high, 2**31 - 1))]
    return [(label, v) for label, v in values if low <= v <= high]


def _values(t: Any, current: Any) -> list[tuple[str, Any]]:
    """The mutations of one field of annotation ``t`` whose value is ``current``."""
    t, nullable = _plain(t)
    out: list[tuple[str, Any]] = [("null", None)] if nullable and current is not None else []
    element = _element(t)
    if element is not None:
        entry = current[0] if current else None
        if entry is None:
            try:
                entry = neutral(element)
            except TypeError:
                return [*out, ("empty", ())]
        return [*out, ("empty", ()), ("thousands", (entry,) * THOUSANDS)]
    if not isinstance(t, type) or dataclasses.is_dataclass(t):
        return out
    if issubclass(t, bool):
        return [*out, ("flipped", not current)]
    if issubclass(t, int):
        return out + _int_values(t)
    if issubclass(t, datetime.timedelta):
        ms = [("0", 0), ("-1", -1), ("max", 2**31 - 1), ("min", -(2**31))]
        return out + [(label, datetime.timedelta(milliseconds=v)) for label, v in ms]
    if issubclass(t, float):
        return [*out, ("0", 0.0), ("-1", -1.0), ("huge", 1e308)]
    if issubclass(t, uuid.UUID):
        return [*out, ("zero", uuid.UUID(int=0)), ("random", uuid.UUID(int=random.Random(7).getrandbits(128)))]
    if issubclass(t, Records):
        return [*out, ("empty", b"")]
    if issubclass(t, str):
        return [*out, ("empty", ""), ("huge", "x" * HUGE_STRING), ("bad-utf8", BAD_UTF8_MARK)]
    if issubclass(t, bytes):
        return [*out, ("empty", b""), ("huge", b"\xff" * HUGE_STRING)]
    return out


def _fields(value: Any, prefix: Path = ()) -> Iterator[tuple[Path, Any, Any]]:
    """``(path, annotation, value)`` of every field, nested ones through each array's first entry."""
    for f in dataclasses.fields(value):
        current = getattr(value, f.name)
        path = (*prefix, f.name)
        yield path, f.type, current
        if isinstance(current, tuple) and current and dataclasses.is_dataclass(current[0]):
            yield from _fields(current[0], (*path, 0))
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            yield from _fields(current, path)


def mutations(seeds: list[Seed]) -> list[Mutation]:
    """Every mutation of every field of every seed, in a fixed order."""
    return [
        Mutation(seed, path, label, value)
        for seed in seeds
        for path, annotation, current in _fields(seed.request)
        for label, value in _values(annotation, current)
    ]


def _replace(value: Any, path: Path, new: Any) -> Any:
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        entries = list(value)
        entries[head] = _replace(entries[head], rest, new) if rest else new
        return tuple(entries)
    inner = _replace(getattr(value, head), rest, new) if rest else new
    return dataclasses.replace(value, **{head: inner})


def encode(mutation: Mutation, correlation_id: int) -> bytes | None:
    """The mutated request's frame (size prefix included), or None when the value does not encode
    at this version (e.g. a null where the version has no null)."""
    seed = mutation.seed
    try:
        request = _replace(seed.request, mutation.path, mutation.value)
        frame = encode_request(api_schema(seed.api_key, seed.version), correlation_id, seed.client_id, request)
    except Exception:
        return None
    mark = BAD_UTF8_MARK.encode()
    return frame.replace(mark, b"\xff" * len(mark)) if mark in frame else frame


@dataclasses.dataclass
class SemanticStats:
    sent: int = 0
    answered: int = 0
    closed: int = 0
    slow: int = 0
    unencodable: int = 0
    connections: int = 0
    seconds: float = 0.0
    fields: set[str] = dataclasses.field(default_factory=set)
    apis: set[int] = dataclasses.field(default_factory=set)
    failures: list[str] = dataclasses.field(default_factory=list)
    slowest: dict[str, float] = dataclasses.field(default_factory=dict)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _silent(mutation: Mutation) -> bool:
    if mutation.seed.api_key != ApiKey.PRODUCE:
        return False
    acks = mutation.value if mutation.path == ("acks",) else mutation.seed.request.acks
    return bool(acks == 0)


async def _worker(port: int, queue: list[Mutation], stats: SemanticStats, timeout: float) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    correlation_id = 0

    async def drop() -> None:
        nonlocal reader, writer
        await close_quietly(writer)
        reader = writer = None

    try:
        while queue:
            mutation = queue.pop()
            correlation_id = (correlation_id + 1) % 0x7FFF0000
            frame = encode(mutation, correlation_id)
            if frame is None:
                stats.unencodable += 1
                continue
            stats.sent += 1
            stats.fields.add(mutation.field)
            stats.apis.add(mutation.seed.api_key)
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                stats.connections += 1
            assert reader is not None
            silent = _silent(mutation)
            expected = PROBE_CORRELATION_ID if silent else correlation_id
            started = time.monotonic()
            try:
                writer.write(frame + PROBE if silent else frame)
                response = await asyncio.wait_for(_read_frame(reader), timeout)
                (cid,) = struct.unpack_from(">i", response, 0)
                if cid != expected:
                    stats.failures.append(f"{mutation.field}={mutation.label}: correlation id {cid}, not {expected}")
                stats.answered += 1
            except TimeoutError:
                stats.slow += 1
                if mutation.seed.api_key not in WAITING_APIS:
                    stats.failures.append(f"{mutation.field}={mutation.label}: no answer in {timeout} s")
                await drop()
            except (asyncio.IncompleteReadError, ConnectionError):
                stats.closed += 1
                await drop()
            took = time.monotonic() - started
            if took > stats.slowest.get(mutation.field, 0.0):
                stats.slowest[mutation.field] = took
    finally:
        await drop()


async def run_semantic_fuzz(
    port: int, seed: int, requests: int, workers: int = 4, timeout: float = 5.0
) -> tuple[SemanticStats, int]:
    """Send ``requests`` mutations drawn with ``seed`` (0: all of them, shuffled) from ``workers``
    connections; returns the stats and how many mutations there are in all."""
    every = mutations(load_seeds())
    rng = random.Random(seed)
    chosen = rng.sample(every, min(requests, len(every))) if requests > 0 else rng.sample(every, len(every))
    stats = SemanticStats()
    t0 = time.perf_counter()
    await asyncio.gather(*(_worker(port, chosen, stats, timeout) for _ in range(workers)))
    stats.seconds = time.perf_counter() - t0
    return stats, len(every)

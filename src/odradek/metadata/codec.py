"""JSON helpers shared by the znode codecs, and the ``TopicPartition`` shape they accept.

:class:`JsonReader` parses a znode's bytes as a JSON object and offers typed getters that raise
:class:`~odradek.metadata.errors.ZNodeDecodeError` naming the znode path and the offending key.
:func:`dumps_json` writes compact UTF-8 JSON (``{"version":1,"host":"h1"}``), as Kafka's Jackson does.

Pure functions: safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from typing import Any, NamedTuple, Protocol

from odradek.metadata.errors import ZNodeDecodeError

__all__ = [
    "ZERO_UUID",
    "JsonReader",
    "TopicPartition",
    "TopicPartitionLike",
    "decode_long",
    "dumps_json",
    "now_ms",
    "uuid_from_kafka_string",
    "uuid_to_kafka_string",
]

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: "no id"."""


def uuid_to_kafka_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_kafka_string(text: str) -> uuid.UUID:
    """Parse :func:`uuid_to_kafka_string`'s form (or a canonical hex UUID); ``ValueError`` otherwise."""
    if len(text) == 22:
        try:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        except (binascii.Error, ValueError):
            pass
    return uuid.UUID(text)


class TopicPartitionLike(Protocol):
    """Anything with ``topic`` and ``partition`` (the project's ``TopicPartition`` types all fit)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dumps_json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class JsonReader:
    """Typed access to a JSON object, raising ZNodeDecodeError that names the znode."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ZNodeDecodeError(path, data, f"not UTF-8 JSON ({e})") from None
        self.obj = self.as_object(value, "the value")

    def fail(self, reason: str) -> ZNodeDecodeError:
        return ZNodeDecodeError(self.path, self.data, reason)

    def as_object(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{what} is not a JSON object")
        return value

    def as_int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{what} is not an integer")
        return value

    def as_str(self, value: Any, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{what} is not a string")
        return value

    def as_int_list(self, value: Any, what: str) -> list[int]:
        if not isinstance(value, list):
            raise self.fail(f"{what} is not a JSON array")
        return [self.as_int(v, f"an element of {what}") for v in value]

    def get_int(self, key: str, obj: dict[str, Any] | None = None) -> int:
        return self.as_int(self.required(key, obj), f"'{key}'")

    def get_str(self, key: str, obj: dict[str, Any] | None = None) -> str:
        value = self.required(key, obj)
        if not isinstance(value, str):
            raise self.fail(f"'{key}' is not a string")
        return value

    def get_int_text(self, key: str) -> int:
        """An integer written as a JSON string (Kafka's timestamps) or a number."""
        value = self.required(key)
        try:
            return int(value) if isinstance(value, str) else self.as_int(value, f"'{key}'")
        except ValueError:
            raise self.fail(f"'{key}' is not a decimal integer") from None

    def required(self, key: str, obj: dict[str, Any] | None = None) -> Any:
        source = self.obj if obj is None else obj
        if key not in source:
            raise self.fail(f"missing key '{key}'")
        return source[key]


def decode_long(path: str, data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ZNodeDecodeError(path, data, "not a decimal integer") from None

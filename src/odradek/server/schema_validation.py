"""Broker-side schema id validation: the topic config ``confluent.value.schema.validation=true``
(Confluent Server's key) makes Produce refuse, with INVALID_RECORD, every batch holding a record
whose value does not start with Confluent's wire header: magic byte 0 and a 4-byte big-endian
schema id registered (live) under the subject ``<topic>-value`` (TopicNameStrategy). A null value
is refused too. Protobuf's message-index varints after the id are not looked at.

The ids come from this broker's own registry (``schema.registry.listener``): its in-memory
``ids_by_subject`` map, replaced as a whole on every change so another thread may read it. An id
missing from it makes the check wait (on the broker's loop, not blocking it) until that registry
has read ``_schemas`` to its end, at most ``CATCH_UP_TIMEOUT_S``, then look again: a schema just
registered through another instance is not refused. No HTTP request is ever made. A broker
without a registry refuses every batch of a validated topic (it cannot check).

The records are read without being re-encoded: batch headers are parsed in place, compressed
records are decompressed (bounded by ``MAX_EXPANSION`` x ``max.message.bytes``) and only the first
5 bytes of each value are looked at. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from odradek.errors import CorruptRecordError, ErrorCode, RecordValidationError
from odradek.protocol.records import COMPRESSION_CODEC_MASK, LOG_OVERHEAD, RECORDS_OFFSET, iter_batches, read_varint
from odradek.protocol.records_compression import decompress_bounded

if TYPE_CHECKING:
    from odradek.schema_registry.server import RegistryServer

log = logging.getLogger(__name__)

VALIDATION_KEY = "confluent.value.schema.validation"
MAX_EXPANSION = 32
CATCH_UP_TIMEOUT_S = 2.0


def _field(data: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    size, pos = read_varint(data, pos, end, 5)
    if size < -1 or pos + max(size, 0) > end:
        raise CorruptRecordError(f"invalid field length {size}")
    return size, pos, pos + max(size, 0)


def value_headers(records: bytes | memoryview, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """``(index, first 5 bytes of the value or None for a null value)`` per record, indexes
    counting from 0 in each batch. Raises CorruptRecordError on malformed records."""
    view = memoryview(records)
    for pos, h in iter_batches(view):
        batch = view[pos : pos + h.batch_length + LOG_OVERHEAD]
        codec = h.attributes & COMPRESSION_CODEC_MASK
        body = batch[RECORDS_OFFSET:]
        data = decompress_bounded(codec, body, max_bytes) if codec else body
        end = data.nbytes
        at = 0
        for index in range(h.records_count):
            length, at = read_varint(data, at, end, 5)
            record_end = at + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(f"record {index} declares length {length} beyond the batch")
            at += 1
            _, at = read_varint(data, at, record_end, 10)
            _, at = read_varint(data, at, record_end, 5)
            _, _, at = _field(data, at, record_end)
            size, start, _ = _field(data, at, record_end)
            yield index, None if size < 0 else bytes(data[start : start + min(size, 5)])
            at = record_end


class SchemaIdValidator:
    """Checks produced values of validated topics against ``registry``'s ids (see the module docstring)."""

    def __init__(
        self,
        overrides: Callable[[str], Mapping[str, str]],
        max_message_bytes: Callable[[str], int],
        registry: RegistryServer | None = None,
    ) -> None:
        self.overrides = overrides
        self.max_message_bytes = max_message_bytes
        self.registry = registry

    def enabled(self, topic: str) -> bool:
        return str(self.overrides(topic).get(VALIDATION_KEY, "false")).strip().lower() == "true"

    def _ids(self, subject: str) -> frozenset[int]:
        registry = self.registry.registry if self.registry is not None else None
        return registry.state.ids_by_subject.get(subject, frozenset()) if registry is not None else frozenset()

    async def _catch_up(self) -> None:
        server = self.registry
        if server is None or server.loop is None or server.registry is None:
            return
        future = asyncio.run_coroutine_threadsafe(server.registry.store.sync(), server.loop)
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), CATCH_UP_TIMEOUT_S)
        except Exception as e:  # a timeout or a store error: judge with what is known
            log.debug("schema registry catch-up for validation failed: %s", e)

    async def check(self, topic: str, records: bytes) -> None:
        """Raise RecordValidationError (INVALID_RECORD) unless every value carries a registered id."""
        subject = f"{topic}-value"
        if self.registry is None:
            raise RecordValidationError(
                f"Topic {topic} has {VALIDATION_KEY}=true but this broker serves no schema registry "
                "(schema.registry.listener)",
                ErrorCode.invalid_record,
                [],
            )
        headers = list(value_headers(records, MAX_EXPANSION * max(1, self.max_message_bytes(topic))))
        errors = self._errors(subject, headers)
        if errors and any(m.startswith("Unknown schema id") for _, m in errors):
            await self._catch_up()
            errors = self._errors(subject, headers)
        if errors:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            raise RecordValidationError(
                f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
                f"showing the first three errors at most: [{shown}]",
                ErrorCode.invalid_record,
                [(i, m) for i, m in errors],
            )

    def _errors(self, subject: str, headers: list[tuple[int, bytes | None]]) -> list[tuple[int, str]]:
        ids = self._ids(subject)
        errors = []
        for index, head in headers:
            if head is None or len(head) < 5 or head[0] != 0:
                errors.append((index, f"Record value has no schema id (magic byte 0 and a 4-byte id) for {subject}"))
                continue
            (schema_id,) = struct.unpack(">i", head[1:5])
            if schema_id not in ids:
                errors.append((index, f"Unknown schema id {schema_id} for subject {subject}"))
        return errors

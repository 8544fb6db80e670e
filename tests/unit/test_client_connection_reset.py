"""A connection reset while a request is being written: the caller gets one KafkaConnectionError
and the request's future is not left with an exception nobody retrieves (asyncio's "Future
exception was never retrieved", seen under the fault campaign's resets)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.client.errors import KafkaConnectionError


class _ResetWriter:
    """A stream writer whose drain fails as a reset socket does, after the read loop saw the reset."""

    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection

    def write(self, _data: bytes) -> None:
        pass

    async def drain(self) -> None:
        self.connection._fail_pending("connection to b:1 failed: [Errno 104] Connection reset by peer")
        raise ConnectionResetError(104, "Connection reset by peer")

    def close(self) -> None:
        pass


def test_reset_during_the_write_leaves_no_unretrieved_future() -> None:
    unretrieved: list[Any] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
        conn = KafkaConnection("b", 1)
        conn._stream = _ResetWriter(conn)  # type: ignore[assignment]
        with pytest.raises(KafkaConnectionError, match="cannot send to b:1"):
            await conn._send(RequestBuilder(18, 0)())
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert unretrieved == []

"""Run a broker on a background thread with its own event loop (:class:`BrokerRunner`).

Used by the pytest plugin (:mod:`odradek.testing`), the demo and the benchmarks: synchronous
client libraries in the calling thread talk to a real broker on a free 127.0.0.1 port.
``start()`` returns once the broker answers requests (typically well under a second); ``stop()``
shuts it down cleanly; ``kill()`` abandons it without a clean shutdown (no checkpoint, no
clean-shutdown marker), to test recovery. ``call(coro_fn)`` runs a coroutine function on the
broker's loop and returns its result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from odradek.metadata.store import CoordinationStore
    from odradek.server.broker import Broker

T = TypeVar("T")

TEST_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "5",
}


class BrokerRunner:
    """A broker on a background thread. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        data_dir: str | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        broker_id: int = 0,
        store: CoordinationStore | None = None,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="odradek-")
            data_dir = self._tmp.name
        self.data_dir = str(data_dir)
        from odradek.server.config import KafkaConfig

        props = {**TEST_DEFAULTS, "log.dirs": self.data_dir, "broker.id": str(broker_id), **(overrides or {})}
        self.config = KafkaConfig(props)
        self._store = store
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None, "broker not started"
        return self.broker.bootstrap_servers

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.endpoints[0].port

    def start(self, timeout: float = 30.0) -> BrokerRunner:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()

        from odradek.server.broker import Broker

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            try:
                self.broker = Broker(self.config, self._store)
                loop.run_until_complete(self.broker.startup())
            except BaseException as exc:
                ready.set_exception(exc)  # a bad config too: start() raises it at once
                try:
                    loop.run_until_complete(self._quiet_shutdown())
                finally:
                    loop.close()
                return
            ready.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="odradek-broker", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout)
        except concurrent.futures.TimeoutError:
            raise
        except BaseException:  # start-up failed: wait for its shutdown and the loop's close
            self._thread.join(timeout)
            raise
        return self

    async def _quiet_shutdown(self) -> None:
        if self.broker is not None:
            try:
                await self.broker.shutdown()
            except Exception:
                pass

    def call(self, fn: Callable[[], Coroutine[object, object, T]], timeout: float = 30.0) -> T:
        """Run ``fn()`` (a coroutine function) on the broker's loop; return its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self.loop is None or self._thread is None:
            return
        if self.loop.is_running():
            try:
                self.call(self._quiet_shutdown, timeout)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        self._thread = None
        self.loop = None

    def kill(self) -> None:
        """Stop serving without a clean shutdown (sockets closed, no markers or checkpoints)."""
        if self.loop is None or self._thread is None:
            return
        broker = self.broker

        async def abandon() -> None:
            if broker is not None:
                await broker.socket_server.stop()
                await broker.scheduler.shutdown()
                if broker.controller is not None:
                    await broker.controller.shutdown()
                if broker.store is not None:
                    await broker.store.close()
                if broker.log_manager is not None:
                    for log_ in broker.log_manager.all_logs():
                        log_.close()
                await broker.close_securities()  # a crash ends the process's login too

        try:
            self.call(abandon)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self._thread = None
            self.loop = None

    def cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> BrokerRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()

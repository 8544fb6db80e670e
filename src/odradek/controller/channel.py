"""How the controller reaches brokers: Kafka's ``ControllerChannelManager`` over the wire protocol.

One :class:`RequestSendTask` per live broker holds one :class:`KafkaConnection` to the broker's
inter-broker endpoint (the ``inter.broker.listener.name`` entry of its ``/brokers/ids/<id>``
registration) and one FIFO queue. The controller's event loop only enqueues
(:meth:`ControllerChannelManager.send_leader_and_isr` and friends return at once); the task sends
the queued requests one at a time, in order. A request that fails (cannot connect, connection
lost, no answer within ``controller.socket.timeout.ms``) is sent again on a fresh connection after
a back-off (100 ms, doubling to 2 s) for as long as the broker stays registered: the controller
adds a broker's task when ``/brokers/ids/<id>`` appears (:meth:`add_broker`) and drops it, with
whatever is still queued, when the znode goes (:meth:`remove_broker`). A broker that comes back
gets the full state from the controller again. Errors in answers are logged (per partition,
grouped by error code); a broker that lacks the API or every version of it is logged and skipped.

Encoded when queued. A request is turned into its wire message when it is queued, by its
builder (:mod:`odradek.controller.messages`: the request, an immutable snapshot, with the live
brokers known at that moment), so what a broker
receives is what the controller decided when it queued it, whatever the controller changes while
the request waits. The version is the one known for the broker when queued: the highest both
sides support on the task's last connection (ApiVersions), or before any connection the highest
the controller sends (Kafka 3.9's: LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8). Should the
connection that finally sends it support another version (the broker restarted with another
release meanwhile), the builder encodes the same snapshot again at that version: same data, other layout.

The controller is a broker too and reaches itself through its own listener, like every other
broker. :class:`LocalControllerChannel` delivers the same requests to in-process targets
directly; it is a test aid, never used by a broker.

Event-loop only: every method must be called from the loop that runs the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaConnectionError, KafkaProtocolError, KafkaTimeoutError
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.controller.messages import RequestBuilder, endpoint_of, leader_and_isr, stop_replica, update_metadata
from odradek.controller.messages.leader_and_isr import LeaderAndIsrRequestBuilder
from odradek.controller.messages.stop_replica import StopReplicaRequestBuilder
from odradek.controller.messages.update_metadata import UpdateMetadataRequestBuilder
from odradek.controller.requests import (
    ControllerRequestTarget,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.errors import ErrorCode, UnsupportedVersionError
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.api_keys import ApiKey

__all__ = [
    "ControllerChannelManager",
    "ControllerRequestTarget",
    "LeaderAndIsrRequest",
    "LocalControllerChannel",
    "RequestSendTask",
    "StopReplicaRequest",
    "UpdateMetadataRequest",
]

log = logging.getLogger(__name__)

API_NAMES = {
    ApiKey.LEADER_AND_ISR: "LeaderAndIsr",
    ApiKey.STOP_REPLICA: "StopReplica",
    ApiKey.UPDATE_METADATA: "UpdateMetadata",
}
MAX_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: leader_and_isr.MAX_VERSION,
    ApiKey.STOP_REPLICA: stop_replica.MAX_VERSION,
    ApiKey.UPDATE_METADATA: update_metadata.MAX_VERSION,
}
"""The highest version the controller sends of each API (Kafka 3.9's ZooKeeper controller)."""
RETRY_BACKOFF_MS = 100
MAX_RETRY_BACKOFF_MS = 2000

ResponseCallback = Callable[[int, Any], None]
"""``callback(broker_id, response)``, called on the controller's loop once a request is answered."""


@dataclass(frozen=True)
class QueuedRequest:
    """A request as queued: its wire message, encoded when queued at ``version``."""

    api_key: ApiKey
    version: int
    message: Any
    """The kio request message at ``version``."""
    builder: RequestBuilder
    """The same snapshot's message at another version (if the broker needs another one)."""
    callback: ResponseCallback | None = None
    topic_names: Mapping[str, str] | None = None
    """Topic id (as text) -> name, to name partitions in log lines (LeaderAndIsr v5+ answers by id)."""

    def message_at(self, version: int) -> Any:
        """The wire message at ``version``: the one encoded when queued, or the snapshot encoded again."""
        return self.message if version == self.version else self.builder.build(version)


def response_errors(
    api_key: int, response: Any, topic_names: Mapping[str, str] | None = None
) -> tuple[ErrorCode, dict[str, ErrorCode]]:
    """(top-level error, partition name "topic-p" -> error for partitions that failed); topics
    answered by id are named through ``topic_names`` when it knows them."""
    listed: list[tuple[str, int, ErrorCode]] = []
    if api_key == ApiKey.LEADER_AND_ISR:
        listed = leader_and_isr.response_errors(response, topic_names or {})
    elif api_key == ApiKey.STOP_REPLICA:
        listed = stop_replica.response_errors(response)
    failed: dict[str, ErrorCode] = {
        f"{topic}-{partition}": code for topic, partition, code in listed if code != ErrorCode.none
    }
    return ErrorCode(response.error_code), failed


class RequestSendTask:
    """One broker's connection and ordered queue (Kafka's ``RequestSendThread``, as a task)."""

    def __init__(
        self,
        controller_id: int,
        info: BrokerInfo,
        host: str,
        port: int,
        request_timeout_ms: int,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self.controller_id = controller_id
        self.security = security
        self.broker_id = info.id
        self.info = info
        self.host = host
        self.port = port
        self.request_timeout_ms = request_timeout_ms
        self.queue: asyncio.Queue[QueuedRequest] = asyncio.Queue()
        self.connection: KafkaConnection | None = None
        self.versions: dict[ApiKey, int] = {}
        """API key -> the version the last connection negotiated (ApiVersions), used when queuing."""
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-{controller_id}-to-broker-{info.id}"
        )

    def version_for(self, api_key: ApiKey) -> int:
        """The version to encode a request for this broker at when it is queued (module docstring)."""
        return self.versions.get(api_key, MAX_VERSIONS[api_key])

    def enqueue(self, item: QueuedRequest) -> None:
        self.queue.put_nowait(item)

    def stop(self) -> None:
        """Cancel the task; queued requests are dropped and the connection closes."""
        self.task.cancel()

    async def _run(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                try:
                    response = await self._send_with_retries(item)
                    if response is not None:
                        self._handle_response(item, response)
                finally:
                    self.queue.task_done()
        finally:
            connection, self.connection = self.connection, None
            if connection is not None:
                with contextlib.suppress(Exception):
                    await connection.close()

    async def _connect(self) -> KafkaConnection:
        if self.connection is not None and not self.connection.closed:
            return self.connection
        self.connection = KafkaConnection(
            self.host,
            self.port,
            client_id=f"controller-{self.controller_id}",
            request_timeout_ms=self.request_timeout_ms,
            connect_timeout_ms=self.request_timeout_ms,
            security=self.security,
        )
        try:
            await self.connection.connect()
        except BaseException:
            self.connection = None
            raise
        return self.connection

    async def _send_with_retries(self, item: QueuedRequest) -> Any:
        name = API_NAMES[item.api_key]
        attempt = 0
        while True:
            try:
                connection = await self._connect()
                version = connection.version_for(item.api_key, max_version=MAX_VERSIONS[item.api_key])
                self.versions[item.api_key] = version
                return await connection.send(item.message_at(version), timeout_ms=self.request_timeout_ms)
            except UnsupportedVersionError as exc:
                log.error(
                    "controller %d: cannot send %s to broker %d: %s", self.controller_id, name, self.broker_id, exc
                )
                return None
            except (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError) as exc:
                attempt += 1
                level = logging.WARNING if attempt == 1 or attempt % 50 == 0 else logging.DEBUG
                log.log(
                    level,
                    "controller %d: %s to broker %d at %s:%d failed (attempt %d), retrying: %s",
                    self.controller_id,
                    name,
                    self.broker_id,
                    self.host,
                    self.port,
                    attempt,
                    exc,
                )
                stale, self.connection = self.connection, None
                if stale is not None:
                    await stale.close()
                await asyncio.sleep(min(RETRY_BACKOFF_MS << min(attempt - 1, 8), MAX_RETRY_BACKOFF_MS) / 1000)

    def _handle_response(self, item: QueuedRequest, response: Any) -> None:
        name = API_NAMES[item.api_key]
        error, failed = response_errors(item.api_key, response, item.topic_names)
        if error != ErrorCode.none:
            log.warning(
                "controller %d: broker %d answered %s with %s", self.controller_id, self.broker_id, name, error.name
            )
        by_error: dict[ErrorCode, list[str]] = {}
        for partition, code in failed.items():
            by_error.setdefault(code, []).append(partition)
        for code, partitions in by_error.items():
            # the same leader epoch sent again (a resend after a controller or broker change) is STALE: expected
            level = logging.INFO if code == ErrorCode.stale_controller_epoch else logging.WARNING
            log.log(
                level,
                "controller %d: broker %d answered %s for %d partitions with %s: %s",
                self.controller_id,
                self.broker_id,
                name,
                len(partitions),
                code.name,
                ", ".join(sorted(partitions)[:10]) + (" …" if len(partitions) > 10 else ""),
            )
        if item.callback is not None:
            try:
                item.callback(self.broker_id, response)
            except Exception:
                log.exception("controller %d: %s response callback failed", self.controller_id, name)


class ControllerChannelManager:
    """Per-broker queues and connections of the active controller (see the module docstring).

    ``listener`` is the inter-broker listener name; ``request_timeout_ms`` is
    ``controller.socket.timeout.ms``; ``security`` how the controller connects to that listener
    (:func:`odradek.client.security.inter_broker_client_security`).
    """

    def __init__(
        self,
        controller_id: int,
        listener: str = "PLAINTEXT",
        request_timeout_ms: int = 30000,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self.controller_id = controller_id
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self.brokers: dict[int, BrokerInfo] = {}
        self._senders: dict[int, RequestSendTask] = {}

    # --- brokers -----------------------------------------------------------------------------

    def add_broker(self, info: BrokerInfo) -> None:
        """Start a queue for a registered broker. A broker already known at the same endpoint
        keeps its queue; at another endpoint (it restarted elsewhere) the old queue is dropped."""
        endpoint = endpoint_of(info, self.listener)
        current = self._senders.get(info.id)
        if current is not None and endpoint == (current.host, current.port):
            current.info = info
            self.brokers[info.id] = info
            return
        self.remove_broker(info.id)
        if endpoint is None:
            log.error(
                "controller %d: broker %d registered no %s endpoint (%s); it cannot be reached",
                self.controller_id,
                info.id,
                self.listener,
                ", ".join(info.effective_endpoints()),
            )
            return
        self.brokers[info.id] = info
        self._senders[info.id] = RequestSendTask(
            self.controller_id, info, endpoint[0], endpoint[1], self.request_timeout_ms, self.security
        )

    def remove_broker(self, broker_id: int) -> None:
        """Drop a broker's queue (its registration is gone): queued requests are discarded."""
        self.brokers.pop(broker_id, None)
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def shutdown(self) -> None:
        """Drop every queue (the controller resigned or the broker stops)."""
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._senders

    async def wait_sent(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queue is empty and answered (tests); False on timeout."""
        try:
            async with asyncio.timeout(timeout_s):
                for sender in list(self._senders.values()):
                    await sender.queue.join()
        except TimeoutError:
            return False
        return True

    # --- requests ----------------------------------------------------------------------------

    def _enqueue(
        self,
        broker_id: int,
        api_key: ApiKey,
        builder: RequestBuilder,
        callback: ResponseCallback | None,
        topic_names: Mapping[str, str] | None = None,
    ) -> bool:
        """Encode for ``broker_id`` at the version known for it now and queue; False if the broker
        has no queue (not live)."""
        sender = self._senders.get(broker_id)
        if sender is None:
            return False
        version = sender.version_for(api_key)
        sender.enqueue(QueuedRequest(api_key, version, builder.build(version), builder, callback, topic_names))
        return True

    async def send_leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest, callback: ResponseCallback | None = None
    ) -> bool:
        """Queue LeaderAndIsr for ``broker_id``; False if the broker has no queue (not live)."""
        builder = LeaderAndIsrRequestBuilder(request, dict(self.brokers), self.listener, self._epoch(broker_id))
        return self._enqueue(broker_id, ApiKey.LEADER_AND_ISR, builder, callback, builder.topic_names())

    async def send_update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest, callback: ResponseCallback | None = None
    ) -> bool:
        """Queue UpdateMetadata for ``broker_id``; False if the broker has no queue."""
        builder = UpdateMetadataRequestBuilder(request, self.listener, self._epoch(broker_id))
        return self._enqueue(broker_id, ApiKey.UPDATE_METADATA, builder, callback)

    async def send_stop_replica(
        self, broker_id: int, request: StopReplicaRequest, callback: ResponseCallback | None = None
    ) -> bool:
        """Queue StopReplica for ``broker_id``; False if the broker has no queue."""
        builder = StopReplicaRequestBuilder(request, self._epoch(broker_id))
        return self._enqueue(broker_id, ApiKey.STOP_REPLICA, builder, callback)

    def _epoch(self, broker_id: int) -> int:
        """The broker epoch of ``broker_id``'s registration as last read (KIP-380), sent in its
        requests so a broker that registered again refuses what was meant for its previous life."""
        info = self.brokers.get(broker_id)
        return info.epoch if info is not None else -1


class LocalControllerChannel(ControllerChannelManager):
    """Test aid: delivers requests to in-process targets directly, awaiting each one (no socket,
    no queue). ``targets`` maps broker id to the object handling its requests."""

    def __init__(self, controller_id: int, targets: Mapping[int, ControllerRequestTarget]) -> None:
        super().__init__(controller_id)
        self.targets = targets

    def add_broker(self, info: BrokerInfo) -> None:
        self.brokers[info.id] = info

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def shutdown(self) -> None:
        self.brokers.clear()

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self.brokers and broker_id in self.targets

    async def wait_sent(self, timeout_s: float = 10.0) -> bool:
        return True

    async def send_leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest, callback: ResponseCallback | None = None
    ) -> bool:
        if not self.has_broker(broker_id):
            return False
        await self.targets[broker_id].handle_leader_and_isr(request)
        return True

    async def send_update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest, callback: ResponseCallback | None = None
    ) -> bool:
        if not self.has_broker(broker_id):
            return False
        await self.targets[broker_id].handle_update_metadata(request)
        return True

    async def send_stop_replica(
        self, broker_id: int, request: StopReplicaRequest, callback: ResponseCallback | None = None
    ) -> bool:
        if not self.has_broker(broker_id):
            return False
        errors = await self.targets[broker_id].handle_stop_replica(request)
        if callback is not None:
            callback(broker_id, stop_replica.encode_response(stop_replica.MAX_VERSION, ErrorCode.none, errors))
        return True

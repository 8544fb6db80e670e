"""The schema registry a broker serves when ``schema.registry.listener`` is set.

The registry (:class:`odradek.schema_registry.server.RegistryServer`) runs on a thread and event
loop of its own; this module only builds its config from the broker's: the bootstrap server is the
broker's own inter-broker endpoint with the inter-broker client security; leader election uses
``zookeeper.connect`` when set (a registry beside an embedded store leads itself); Basic
credentials are checked against the broker's own SASL listener when the inter-broker one is not
SASL (:func:`auth_target`); the ``_schemas`` topic waits for
``min(3, offsets.topic.replication.factor)`` live brokers before it is created. :func:`start`
and :func:`stop` block (and import the web stack); the broker calls them through
``asyncio.to_thread`` so its request loop keeps serving the registry's own Kafka requests
meanwhile (:class:`BrokerSchemaRegistry`: the lifecycle, retries included).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from odradek.client.security import ClientSecurity
from odradek.security.listener_config import listener_config

if TYPE_CHECKING:
    from odradek.schema_registry.server import RegistryConfig, RegistryServer

log = logging.getLogger(__name__)


def auth_target(config: Any, endpoints: Sequence[Any], security: ClientSecurity) -> tuple[str, ClientSecurity] | None:
    """Where Basic credentials are checked when the inter-broker client does not use SASL: the
    broker's first SASL_PLAINTEXT listener, else its first SASL_SSL one (with that listener's
    ``ssl.*`` keys, so its trust store verifies the broker). None when it has no SASL listener or
    the inter-broker client already uses SASL."""
    if security.uses_sasl:
        return None
    protocols = config.security_protocol_map()
    for wanted in ("SASL_PLAINTEXT", "SASL_SSL"):
        for endpoint in endpoints:
            if protocols.get(endpoint.listener, endpoint.listener) != wanted:
                continue
            resolved = listener_config(config.originals, endpoint.listener)
            props = {k: v for k, v in resolved.items() if k.startswith("ssl.")}
            # placeholder credentials: each login replaces them with the request's
            props.update({"security.protocol": wanted, "sasl.mechanism": "SCRAM-SHA-256"})
            props.update({"sasl.username": "-", "sasl.password": "-"})
            return f"{endpoint.host}:{endpoint.port}", ClientSecurity.from_properties(props)
    return None


def registry_config(
    config: Any, address: tuple[str, int], security: ClientSecurity, endpoints: Sequence[Any] = ()
) -> RegistryConfig | None:
    """The registry config of a broker's ``KafkaConfig`` (None when no listener is set)."""
    listener = config.get("schema.registry.listener")
    if not listener:
        return None
    from odradek.schema_registry.server import RegistryConfig

    props = {
        key: (",".join(value) if isinstance(value, list) else value)
        for key in (
            "schema.registry.listener",
            "schema.registry.ssl.certificate.location",
            "schema.registry.ssl.key.location",
            "schema.registry.authentication.method",
            "schema.registry.writers",
            "schema.registry.max.request.bytes",
        )
        if (value := config.get(key)) is not None
    }
    result = RegistryConfig.from_properties(
        props,
        bootstrap_servers=f"{address[0]}:{address[1]}",
        zookeeper_connect=config.zookeeper_connect,
        security=security,
        auth_target=auth_target(config, endpoints, security),
    )
    result.zookeeper_session_timeout_ms = int(config.get("zookeeper.session.timeout.ms") or 18000)
    result.wait_for_brokers = min(3, int(config.get("offsets.topic.replication.factor") or 1))
    return result


def start(
    config: Any, address: tuple[str, int], security: ClientSecurity, endpoints: Sequence[Any] = ()
) -> RegistryServer | None:
    """Start the registry of a broker's config (blocks until it serves; raises when it cannot);
    None when ``schema.registry.listener`` is unset. Imports the web stack here, off the broker's loop."""
    registry = registry_config(config, address, security, endpoints)
    if registry is None:
        return None
    from odradek.schema_registry.server import RegistryServer

    return RegistryServer(registry).start(timeout_s=60.0)


def stop(server: RegistryServer) -> None:
    server.stop()


class BrokerSchemaRegistry:
    """A broker's registry on ``schema.registry.listener``: started after the broker serves,
    retried every :attr:`retry_s` while it cannot start (``_schemas`` unreachable: logged, the
    broker goes on), stopped at shutdown. ``server`` is the running registry or None. Event loop
    only; the registry itself runs on its own thread and loop."""

    retry_s = 5.0

    def __init__(self, broker_id: int, on_started: Callable[[RegistryServer], None]) -> None:
        self.broker_id = broker_id
        self.server: RegistryServer | None = None
        self._on_started = on_started
        self._retry: asyncio.Task[None] | None = None
        self._stopped = False

    async def start(
        self, config: Any, address: tuple[str, int] | None, security: ClientSecurity, endpoints: Sequence[Any]
    ) -> None:
        """Start serving (or schedule retries); nothing when the key is unset or there is no address."""
        if address is None or not config.get("schema.registry.listener") or self._stopped:
            return
        try:
            server = await asyncio.to_thread(start, config, address, security, list(endpoints))
        except Exception as e:
            log.error(
                "broker %d: the schema registry did not start (%s); retrying in %.0f s", self.broker_id, e, self.retry_s
            )
            self._retry = asyncio.get_running_loop().create_task(self._again(config, address, security, endpoints))
            return
        if self._stopped:  # the broker began shutting down meanwhile
            if server is not None:
                await asyncio.to_thread(stop, server)
            return
        self.server = server
        if server is not None:
            self._on_started(server)
            log.info("broker %d serves the schema registry on %s", self.broker_id, server.url)

    async def _again(self, *args: Any) -> None:
        await asyncio.sleep(self.retry_s)
        await self.start(*args)

    async def stop(self) -> None:
        """Stop the registry, or its retries. Idempotent; errors are logged, not raised."""
        self._stopped = True
        if self._retry is not None:
            self._retry.cancel()
        server, self.server = self.server, None
        if server is not None:
            try:
                await asyncio.to_thread(stop, server)
            except Exception:
                log.exception("broker %d: stopping the schema registry failed", self.broker_id)

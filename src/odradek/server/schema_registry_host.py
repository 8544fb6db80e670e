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
meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from odradek.client.security import ClientSecurity
from odradek.security.listener_config import listener_config

if TYPE_CHECKING:
    from odradek.schema_registry.server import RegistryConfig, RegistryServer


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

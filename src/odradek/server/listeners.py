"""Binding the listeners, the registration that advertises them, and the controller's listener.

- :func:`bind_listeners`: each of ``listeners`` on the socket server with its
  :class:`~odradek.server.listener_security.ListenerSecurity`; the advertised endpoint of each
  (``advertised.listeners`` over the bound address; a wildcard or ``localhost`` host is advertised
  as 127.0.0.1, never as a name a client may resolve to ::1; port 0 becomes the bound port);
- :func:`registration`: the ``/brokers/ids/<id>`` content Kafka writes: every endpoint
  (``"SASL_SSL://host:9093"``), ``listener_security_protocol_map``, and ``host``/``port`` of the
  first PLAINTEXT endpoint (the first endpoint's when there is none; Kafka writes null/-1);
- :func:`controller_listener`: the listener the controller reaches brokers on
  (``control.plane.listener.name``, else the inter-broker listener) and how it connects there.

Called at start-up on the broker's event loop.
"""

from __future__ import annotations

import time

from odradek.client.security import ClientSecurity, inter_broker_security_for
from odradek.metadata.znodes import BrokerInfo
from odradek.server.config import Endpoint, KafkaConfig
from odradek.server.listener_security import ListenerSecurity
from odradek.server.socket_server import SocketServer


def advertised_host(host: str) -> str:
    """Never advertise a wildcard or ``localhost`` (which clients may resolve to ::1 while we
    listen on 127.0.0.1): both become 127.0.0.1."""
    if host in ("", "0.0.0.0", "::", "localhost"):
        return "127.0.0.1"
    return host


def bind_host(host: str) -> str:
    return "127.0.0.1" if host == "localhost" else host


async def bind_listeners(
    server: SocketServer, config: KafkaConfig, securities: dict[str, ListenerSecurity]
) -> list[Endpoint]:
    """Listen on every listener; the advertised endpoints, in ``listeners`` order."""
    advertised = {e.listener: e for e in (config.advertised_listeners or [])}
    endpoints = []
    for endpoint in config.listeners:
        security = securities[endpoint.listener]
        host, port = await server.start(bind_host(endpoint.host), endpoint.port, security)
        adv = advertised.get(endpoint.listener)
        if adv is not None:
            endpoints.append(Endpoint(adv.listener, advertised_host(adv.host), adv.port or port))
        else:
            endpoints.append(Endpoint(endpoint.listener, advertised_host(endpoint.host or host), port))
    return endpoints


def registration(config: KafkaConfig, endpoints: list[Endpoint]) -> BrokerInfo:
    protocols = {e.listener: config.listener_security_protocol(e.listener) for e in endpoints}
    plaintext = [e for e in endpoints if protocols[e.listener] == "PLAINTEXT"]
    first = (plaintext or endpoints)[0]
    return BrokerInfo(
        id=config.broker_id,
        host=first.host,
        port=first.port,
        endpoints=[str(e) for e in endpoints],
        listener_security_protocol_map=protocols,
        rack=config["broker.rack"],
        timestamp=int(time.time() * 1000),
    )


def controller_listener(config: KafkaConfig, inter_broker: ClientSecurity) -> tuple[str, ClientSecurity]:
    """(listener name, client security) of the controller's connections to the brokers."""
    name = config.control_plane_listener_name
    if name is None:
        return config.inter_broker_listener_name, inter_broker
    return name, inter_broker_security_for(config.originals, name, config.listener_security_protocol(name))

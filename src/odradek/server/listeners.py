"""Binding the listeners, the registration that advertises them, and the controller's listener.

- :func:`bind_listeners`: each of ``listeners`` on the socket server with its
  :class:`~odradek.server.listener_security.ListenerSecurity`, listening on every address its host
  resolves to (:func:`bind_sockets`: ``localhost`` is 127.0.0.1 and ::1 where the resolver says
  so, so a client that picks either connects; a step beyond Kafka, which binds the first); the
  advertised endpoint of each: ``advertised.listeners`` over the listener, the host exactly as
  configured (``localhost`` stays ``localhost``: clients key brokers by host:port), except that a
  wildcard host is advertised as 127.0.0.1; port 0 becomes the bound port;
- :func:`registration`: the ``/brokers/ids/<id>`` content Kafka writes: every endpoint
  (``"SASL_SSL://host:9093"``), ``listener_security_protocol_map``, and ``host``/``port`` of the
  first PLAINTEXT endpoint (the first endpoint's when there is none; Kafka writes null/-1);
- :func:`controller_listener`: the listener the controller reaches brokers on
  (``control.plane.listener.name``, else the inter-broker listener) and how it connects there.

Called at start-up on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from collections.abc import Sequence
from typing import Any

from odradek.client.security import ClientSecurity, inter_broker_security_for
from odradek.metadata.znodes import BrokerInfo
from odradek.server.config import Endpoint, KafkaConfig
from odradek.server.listener_security import ListenerSecurity
from odradek.server.socket_server import SocketServer

WILDCARD_HOSTS = ("", "0.0.0.0", "::")
BIND_ATTEMPTS = 10
"""Tries at a port 0 listener with several addresses whose kernel-chosen port is in use on another."""
UNBINDABLE = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT)
"""Bind errors of an address family this host lacks (no IPv6): that address is skipped."""

SocketAddress = tuple[socket.AddressFamily, tuple[Any, ...]]


def advertised_host(host: str) -> str:
    """The host a listener is advertised as: the configured one unchanged, except a wildcard
    (not an address a client can reach), which becomes 127.0.0.1."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


async def listen_addresses(host: str, port: int) -> list[SocketAddress]:
    """Every (family, sockaddr) ``host`` resolves to for listening, in the resolver's order without
    repeats; an empty host is every local address (0.0.0.0 and ::)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return list(dict.fromkeys((family, sockaddr) for family, _type, _proto, _name, sockaddr in infos))


def _bind_all(addresses: Sequence[SocketAddress], port: int) -> list[socket.socket]:
    sockets: list[socket.socket] = []
    try:
        for family, sockaddr in addresses:
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                if exc.errno in UNBINDABLE:
                    continue
                raise
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            address = (sockaddr[0], port, *sockaddr[2:])
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno in UNBINDABLE and len(addresses) > 1:
                    sockets.pop().close()
                    continue
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address[:2]!r}: {exc.strerror}"
                ) from exc
            port = sock.getsockname()[1]
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise OSError(errno.EADDRNOTAVAIL, f"no address of {[a[1][0] for a in addresses]} can be bound here")
    return sockets


def bind_sockets(addresses: Sequence[SocketAddress], port: int) -> list[socket.socket]:
    """One bound (not yet listening) socket per address, all on one port: ``port``, or for port 0
    the one the kernel gave the first address, tried again from the start (up to
    :data:`BIND_ATTEMPTS` times) when it is taken on another address. IPv6 sockets are IPv6-only.
    An address this host cannot bind (:data:`UNBINDABLE`) is skipped while another binds; any other
    failure raises OSError naming the address, with nothing left open."""
    for attempt in range(BIND_ATTEMPTS):
        try:
            return _bind_all(addresses, port)
        except OSError as exc:
            if port != 0 or exc.errno != errno.EADDRINUSE or attempt + 1 == BIND_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def bind_listeners(
    server: SocketServer, config: KafkaConfig, securities: dict[str, ListenerSecurity]
) -> list[Endpoint]:
    """Listen on every listener; the advertised endpoints, in ``listeners`` order."""
    advertised = {e.listener: e for e in (config.advertised_listeners or [])}
    endpoints = []
    for endpoint in config.listeners:
        sockets = bind_sockets(await listen_addresses(endpoint.host, endpoint.port), endpoint.port)
        port = sockets[0].getsockname()[1]
        await server.start(sockets, securities[endpoint.listener])
        adv = advertised.get(endpoint.listener, endpoint)
        endpoints.append(Endpoint(adv.listener, advertised_host(adv.host), adv.port or port))
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

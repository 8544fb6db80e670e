"""Connection limits of the socket server (Kafka's ``ConnectionQuotas``).

``max.connections`` across the listeners and ``max.connections.per.ip`` (with
``max.connections.per.ip.overrides`` per address) are checked when a connection is accepted; a
refusal is logged once per address every :data:`REFUSAL_LOG_INTERVAL_S` with a count.

Connection rates (KIP-612), each a Kafka ``Rate`` over ``quota.window.num`` windows of
``quota.window.size.seconds`` recorded when a connection is accepted:

- per IP, ``connection_creation_rate`` of ``/config/ips/<ip>``, else of ``/config/ips/<default>``
  (:meth:`ConnectionQuotas.ip_config_changed`); over it the connection is not counted, served
  nothing, and closed after the throttle time (at most one window), logged as a refusal, as
  Kafka's ``ConnectionThrottledException`` and delayed close;
- per listener, ``max.connection.creation.rate`` (``listener.name.<l>.`` for one listener): over
  it the connection is kept but served nothing until the throttle time has passed, and the
  listener's next connections wait behind it (Kafka's acceptor stops accepting for that long; the
  kernel completes their TCP handshakes meanwhile, so a client sees the same).

Event loop only.
"""

from __future__ import annotations

import collections
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.errors import InvalidConfigError
from odradek.server.client_quotas import QuotaRate

DEFAULT_IP = "<default>"
UNLIMITED_RATE = 2147483647

if TYPE_CHECKING:
    from odradek.server.config import KafkaConfig

log = logging.getLogger("odradek.server.socket_server")

REFUSAL_LOG_INTERVAL_S = 10.0


def parse_connection_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,ip:count``) as {ip: count}.

    Host names are resolved once, at start-up; an entry that is not ``name:count`` with a
    non-negative count, or a name that does not resolve, raises InvalidConfigError.
    """
    out: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise InvalidConfigError(f"max.connections.per.ip.overrides: invalid entry {entry!r} (want host:count)")
        try:
            infos = socket.getaddrinfo(host.strip("[] "), None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise InvalidConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        for info in infos:
            out[str(info[4][0])] = int(count)
    return out


CONNECTION_CONFIGS = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate"}
)
"""The broker keys of the connection quotas (Kafka's ``DynamicConnectionQuota``); the listener-prefixed
``listener.name.<l>.max.connection.creation.rate`` counts too."""


class ConnectionKeys:
    """:data:`CONNECTION_CONFIGS` and every listener's ``max.connection.creation.rate``, as a container."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in CONNECTION_CONFIGS or key.endswith(".max.connection.creation.rate"))


@dataclass(frozen=True, slots=True)
class ConnectionQuotaSettings:
    """The connection limits of one configuration, typed."""

    max_connections: int
    max_per_ip: int
    overrides: dict[str, int]
    broker_rate: float
    inter_broker_listener: str
    listener_rates: dict[str, float]

    @classmethod
    def from_config(cls, config: KafkaConfig) -> ConnectionQuotaSettings:
        """From ``config``; InvalidConfigError for a malformed ``max.connections.per.ip.overrides``.
        ``max.connection.creation.rate`` broker-wide (every listener but the inter-broker one
        together) and per listener (its prefixed value, else the plain one, as Kafka's
        ``valuesWithPrefixOverride``)."""
        return cls(
            max_connections=config.get_int("max.connections"),
            max_per_ip=config.get_int("max.connections.per.ip"),
            overrides=parse_connection_overrides(config.get_str("max.connections.per.ip.overrides") or ""),
            broker_rate=float(config.get_int("max.connection.creation.rate")),
            inter_broker_listener=config.inter_broker_listener_name,
            listener_rates={
                e.listener: float(config.listener_value(e.listener, "max.connection.creation.rate"))
                for e in config.listeners
            },
        )


class ConnectionQuotas:
    """Counts open connections per IP and in total; decides whether a new one may stay.

    A :class:`~odradek.server.reconfigurable.BrokerReconfigurable` of its keys
    (:class:`ConnectionKeys`): a dynamic change applies to new connections at once."""

    reconfigurable_configs = ConnectionKeys()

    def __init__(
        self, max_connections: int, max_per_ip: int, overrides: dict[str, int], samples: int = 11, window_s: float = 1.0
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self._refusals: dict[str, tuple[float, int]] = {}
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.ip_rates: dict[str, float] = {}
        """``connection_creation_rate`` by IP (and :data:`DEFAULT_IP`), from ``/config/ips``."""
        self._ip_rates: dict[str, QuotaRate] = {}
        self.listener_rates: dict[str, float] = {}
        """``max.connection.creation.rate`` by listener name (absent: unlimited)."""
        self.broker_rate: float | None = None
        self.inter_broker_listener: str | None = None
        self._listener_rates: dict[str, QuotaRate] = {}
        self._listener_gate: dict[str, float] = {}
        """Listener -> ``time.monotonic()`` before which its new connections are not served."""

    def _throttle(self, rates: dict[str, QuotaRate], key: str, quota: float, now_ms: float) -> int:
        rate = rates.get(key)
        if rate is None:
            if len(rates) >= 100_000:  # many addresses: start over (Kafka expires idle sensors)
                rates.clear()
            rate = rates[key] = QuotaRate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        return min(rate.throttle_ms(quota, now_ms), int(self.window_ms))  # Kafka's boundedThrottleTime

    def ip_throttle_ms(self, ip: str, now_ms: float | None = None) -> int:
        """Record a new connection from ``ip``; over its ``connection_creation_rate`` the throttle
        time (at most one window) and the connection is taken back out of the rate, else 0."""
        quota = self.ip_rates.get(ip, self.ip_rates.get(DEFAULT_IP))
        if quota is None or quota >= UNLIMITED_RATE:
            return 0
        now = time.monotonic() * 1000.0 if now_ms is None else now_ms
        throttle = self._throttle(self._ip_rates, ip, quota, now)
        if throttle > 0:
            self._ip_rates[ip].record(-1.0, now)  # Kafka un-records a throttled connection
        return throttle

    def listener_delay_s(self, listener: str, now_s: float | None = None) -> float:
        """Record a new connection on ``listener`` (and, but on the inter-broker listener, in the
        broker-wide rate); how long it must wait before it is served."""
        broker = self.broker_rate if listener != self.inter_broker_listener else None
        limits = [(key, q) for key, q in ((listener, self.listener_rates.get(listener)), ("", broker)) if q is not None]
        limits = [(key, q) for key, q in limits if q < UNLIMITED_RATE]
        if not limits:
            return 0.0
        now = time.monotonic() if now_s is None else now_s
        gate = max(self._listener_gate.get(listener, 0.0), now)
        throttle = max(self._throttle(self._listener_rates, key, q, gate * 1000.0) for key, q in limits)
        if throttle > 0:
            gate += throttle / 1000.0
        self._listener_gate[listener] = gate
        return gate - now

    def configure_rates(self, config: KafkaConfig) -> None:
        """``max.connection.creation.rate`` from ``config`` (see :class:`ConnectionQuotaSettings`)."""
        settings = ConnectionQuotaSettings.from_config(config)
        self.broker_rate = settings.broker_rate
        self.inter_broker_listener = settings.inter_broker_listener
        self.listener_rates = settings.listener_rates

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        """The new limits must parse (``max.connections.per.ip.overrides`` ``host:count,...``)."""
        ConnectionQuotaSettings.from_config(new_config)

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> None:
        """Apply the new limits and rates; open connections stay, new ones are counted against them."""
        settings = ConnectionQuotaSettings.from_config(new_config)
        self.max_connections = settings.max_connections
        self.max_per_ip = settings.max_per_ip
        self.overrides = settings.overrides
        self.configure_rates(new_config)

    def ip_config_changed(self, name: str, config: dict[str, str]) -> None:
        """The ZkConfigManager handler of ``ips``: ``name`` an address or ``<default>``."""
        raw = config.get("connection_creation_rate")
        try:
            value = None if raw is None else float(raw)
        except ValueError:
            value = None
        if value is None:
            self.ip_rates.pop(name, None)
        else:
            self.ip_rates[name] = value
        if name != DEFAULT_IP:
            self._ip_rates.pop(name, None)

    def try_add(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the refusal reason instead if a limit is reached."""
        limit = self.overrides.get(ip, self.max_per_ip)
        if self.per_ip[ip] >= limit:
            return f"max.connections.per.ip={limit} reached for {ip}"
        if self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        self.per_ip[ip] += 1
        self.total += 1
        return None

    def remove(self, ip: str) -> None:
        self.total -= 1
        left = self.per_ip[ip] - 1
        if left > 0:
            self.per_ip[ip] = left
        else:
            del self.per_ip[ip]

    def log_refusal(self, ip: str, reason: str) -> None:
        now = time.monotonic()
        since, suppressed = self._refusals.get(ip, (0.0, 0))
        if now - since >= REFUSAL_LOG_INTERVAL_S:
            more = f" ({suppressed} more refused since the last line)" if suppressed else ""
            log.warning("refusing a connection from %s: %s%s", ip, reason, more)
            self._refusals[ip] = (now, 0)
        else:
            self._refusals[ip] = (since, suppressed + 1)

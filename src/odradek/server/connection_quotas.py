"""Connection limits of the socket server (Kafka's ``ConnectionQuotas``).

``max.connections`` across the listeners and ``max.connections.per.ip`` (with
``max.connections.per.ip.overrides`` per address) are checked when a connection is accepted; a
refusal is logged once per address every :data:`REFUSAL_LOG_INTERVAL_S` with a count. Event loop
only.
"""

from __future__ import annotations

import collections
import logging
import socket
import time

from odradek.errors import InvalidConfigError

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


class ConnectionQuotas:
    """Counts open connections per IP and in total; decides whether a new one may stay."""

    def __init__(self, max_connections: int, max_per_ip: int, overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self._refusals: dict[str, tuple[float, int]] = {}

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

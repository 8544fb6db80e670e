"""Client quotas as Kafka's ``ClientQuotaManager`` (ZooKeeper mode, ``DefaultQuotaCallback``).

Quotas live in ``/config/users/<user>``, ``/config/users/<user>/clients/<client id>``,
``/config/clients/<client id>`` and the ``<default>`` entities of each level (names sanitized as
:func:`~odradek.metadata.config_entities.sanitize`); the keys are ``producer_byte_rate``
(bytes/s appended by Produce), ``consumer_byte_rate`` (bytes/s answered by Fetch to consumers),
``request_percentage`` (percent of one request-handling thread: handler time per second x 100)
and ``controller_mutation_rate`` (partitions created or deleted per second, KIP-599: a
:class:`TokenBucket`, see :mod:`odradek.server.controller_mutation_quota`).

Precedence, most specific first, for a request of user ``u`` and client id ``c`` (per quota key):
``users/u/clients/c``, ``users/u/clients/<default>``, ``users/u``, ``users/<default>/clients/c``,
``users/<default>/clients/<default>``, ``users/<default>``, ``clients/c``, ``clients/<default>``.
The level that matches also decides who shares a rate (Kafka's metric tags): a user-and-client
level keeps one rate per (u, c), a user level one per u, a client level one per c; so every user
under ``users/<default>`` has a rate of its own.

Rates are Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``:
the sum of the retained samples divided by the time since the oldest retained sample began,
taken as at least ``num - 1`` whole windows; a sample not written for ``num`` windows is reset.
Every recorded value goes into its rate, and the rates are what the quota metrics export
(``kafka_server_produce_byte_rate`` and the others: Kafka's names and values).

What throttles differs by key. Kafka enforces ``producer_byte_rate``, ``consumer_byte_rate`` and
``request_percentage`` on the ``Rate`` itself: over the quota, the throttle time is
``round((rate - quota) / quota x window)`` ms (window: the measured one above). A client that
always has data locks into bursts with it: it may send quota x (num - 1) windows at once, every
request after the first sample completes is a whole window over and waits that long, and the
next burst passes when the burst's sample expires, so single 30 s periods land up to 20 % off the
quota (docs/performance.md "Client quotas"; KIP-599 describes the same flaw of ``Rate``).
odradek keeps that for ``request_percentage`` but enforces the two byte rates with a
:class:`TokenBucket` per rate, as Kafka enforces ``controller_mutation_rate`` (KIP-599): tokens
refill at the quota per second up to a burst of quota x (num - 1) x window seconds (at least one
window), each request's value is taken out, and when the bucket is below zero the throttle time
is ``round(-tokens / quota x 1000)`` ms, the time until it is back at zero ((num - 1) windows
for a quota of 0). The burst is what Kafka's ``Rate`` lets through at the start and
after idleness, and what one capped Fetch may answer (:meth:`ClientQuotaManager.max_value_in_quota_window`),
so a full bucket passes exactly one capped Fetch, as Kafka's rate does; KIP-599's ``TokenBucket``
saves up one window more (``controller_mutation_rate`` keeps that). Over any period after the
first throttle a greedy client then gets the quota (to within one request), not bursts.

A changed quota applies to the next request. A bucket is first refilled up to the change at the
quota it had, then keeps its balance (capped at the new burst; a debt stays owed), as Kafka keeps
a sensor's stat and only changes its ``MetricConfig``; an entity that falls to another level
uses that level's rate and bucket. :meth:`ClientQuotaManager.record` returns the throttle time
in ms (0 within the quota). Loop-only: called from request handlers and the config change handler.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from odradek.metadata.config_entities import DEFAULT_ENTITY, ConfigHandler, desanitize, sanitize

if TYPE_CHECKING:
    from odradek.protocol.codec import RequestHeader
    from odradek.server.session import Session

__all__ = [
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "ClientQuotaManager",
    "ControllerMutationQuotaManager",
    "QuotaRate",
    "TokenBucket",
    "throttle_time_ms",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)

_NONE = None  # a level without that component


@dataclass(slots=True)
class _Sample:
    start_ms: float
    last_ms: float
    value: float = 0.0


@dataclass(slots=True)
class QuotaRate:
    """Kafka's ``Rate`` (a ``SampledStat`` summing values per sample); times in ms. Samples are
    kept oldest first, so the expired ones (no event for ``samples`` windows) are at the front."""

    samples: int
    window_ms: float
    _samples: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: float) -> None:
        samples = self._samples
        current = samples[-1] if samples else None
        if current is None or now_ms - current.start_ms >= self.window_ms:
            current = _Sample(now_ms, now_ms)
            samples.append(current)
            if len(samples) > self.samples + 1:  # one extra: the overlapping sample
                del samples[0]
        current.value += value
        current.last_ms = now_ms

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        samples = self._samples
        while samples and now_ms - samples[0].last_ms >= expire:
            del samples[0]

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is taken over (Kafka's ``Rate.windowSize``): at least 1 ms."""
        self._purge(now_ms)
        elapsed = now_ms - self._samples[0].start_ms if self._samples else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """Units per second."""
        window = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) * 1000.0 / window

    def throttle_ms(self, quota: float, now_ms: float) -> int:
        """Kafka's throttle time of this rate against ``quota`` now (``QuotaUtils.throttleTime``
        with the window the rate is taken over); 0 within the quota."""
        window = self.window_size_ms(now_ms)
        return throttle_time_ms(sum(s.value for s in self._samples) * 1000.0 / window, quota, window)


def throttle_time_ms(rate: float, quota: float, window_ms: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: how long until the rate is back at the quota."""
    if rate <= quota:
        return 0
    if quota <= 0:
        return int(window_ms)
    return round((rate - quota) / quota * window_ms)


QuotaKey = tuple[str | None, str | None]
"""(user entity, client entity) of a level: a sanitized name, ``<default>``, or None (absent)."""

_Resolved = tuple[float, float, "QuotaRate", "TokenBucket | None"]
"""(quota, burst, the rate, the bucket or None: throttled on the rate) of a (user, client)."""


def _levels(user: str, client: str) -> list[tuple[QuotaKey, tuple[str, str]]]:
    """The levels to look up, most specific first, each with the tags its rate is kept under."""
    d = DEFAULT_ENTITY
    return [
        ((user, client), (user, client)),
        ((user, d), (user, client)),
        ((user, _NONE), (user, "")),
        ((d, client), (user, client)),
        ((d, d), (user, client)),
        ((d, _NONE), (user, "")),
        ((_NONE, client), ("", client)),
        ((_NONE, d), ("", client)),
    ]


class ClientQuotaManager:
    """One quota key's quotas, rates and (with ``token_bucket``) buckets; Kafka keeps one manager
    per quota type. ``token_bucket``: throttle on a :class:`TokenBucket` per rate (the broker's
    ``producer_byte_rate`` and ``consumer_byte_rate``) rather than on the ``Rate`` (Kafka's).
    ``bounded``: a throttle time is at most one window (Kafka's ``ClientRequestQuotaManager``
    bounds ``request_percentage`` throttles so, ``QuotaUtils.boundedThrottleTime``)."""

    def __init__(
        self,
        quota_key: str,
        samples: int = 11,
        window_s: float = 1.0,
        clock_ms: Callable[[], float] | None = None,
        token_bucket: bool = False,
        bounded: bool = False,
    ) -> None:
        self.quota_key = quota_key
        self.bounded = bounded
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self.token_bucket = token_bucket
        self.burst_windows = max(samples - 1, 1)
        """The bucket's burst in windows of the quota (see the module docstring)."""
        self.quotas: dict[QuotaKey, float] = {}
        """Quota by level, from ``/config``; empty: quotas disabled (nothing recorded)."""
        self.rates: dict[tuple[str, str], QuotaRate] = {}
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        """Token buckets by rate tags (kept as the rates are: one per who shares a quota)."""
        self.throttled_ms_total = 0
        self._resolved: dict[tuple[str, str], _Resolved | None] = {}
        """(user, client) -> its quota, rate and bucket, or None: no quota; cleared when a quota changes."""

    @property
    def enabled(self) -> bool:
        return bool(self.quotas)

    def burst(self, quota: float) -> float:
        """The most a bucket saves up: quota x ``burst_windows`` x window seconds."""
        return quota * self.burst_windows * self.window_ms / 1000.0

    def update_quota(self, key: QuotaKey, value: float | None, now_ms: float | None = None) -> None:
        """Set (or with None remove) the quota of one level (the config change handler). Every
        bucket is refilled up to now at the quota it had, so that time counts at the old quota."""
        if self.buckets:
            now = self.clock_ms() if now_ms is None else now_ms
            for bucket in self.buckets.values():
                bucket.settle(now)
        if value is None:
            self.quotas.pop(key, None)
        else:
            self.quotas[key] = value
        self._resolved.clear()

    def quota_for(self, user: str, client: str) -> tuple[float, tuple[str, str]] | None:
        """(quota, rate tags) of the most specific level with a quota, else None."""
        quotas = self.quotas
        for key, tags in _levels(user, client):
            value = quotas.get(key)
            if value is not None:
                return value, tags
        return None

    def record(self, user: str, client: str, value: float, now_ms: float | None = None) -> int:
        """Record ``value`` for (sanitized ``user``, sanitized ``client``); the throttle time in ms."""
        if not self.quotas:
            return 0
        try:
            resolved = self._resolved[(user, client)]
        except KeyError:
            resolved = self._resolve(user, client)
        if resolved is None:
            return 0
        quota, burst, rate, bucket = resolved
        now = self.clock_ms() if now_ms is None else now_ms
        rate.record(value, now)
        if bucket is None:
            throttle = rate.throttle_ms(quota, now)
            if self.bounded:
                throttle = min(throttle, int(self.window_ms))
        else:
            tokens = bucket.record(quota, burst, value, now)
            if tokens >= 0:
                return 0
            throttle = round(-tokens / quota * 1000.0) if quota > 0 else int(self.burst_windows * self.window_ms)
        self.throttled_ms_total += throttle
        return throttle

    def measured(self, now_ms: float | None = None) -> list[tuple[str, str, float]]:
        """(user, client id, rate per second) of every rate kept, as Kafka's quota metrics tag
        them: the user sanitized, the client id as sent, "" for a level without that part."""
        now = self.clock_ms() if now_ms is None else now_ms
        return [(user, desanitize(client), rate.measure(now)) for (user, client), rate in self.rates.items()]

    def unrecord(self, user: str, client: str, value: float, now_ms: float | None = None) -> None:
        """Take back ``value`` recorded by :meth:`record` (Kafka's ``unrecordQuotaSensor``: a
        throttled Fetch answers nothing, so its bytes do not count): out of the rate, back into the bucket."""
        resolved = self._resolved.get((user, client))
        if resolved is not None:
            quota, burst, rate, bucket = resolved
            now = self.clock_ms() if now_ms is None else now_ms
            rate.record(-value, now)
            if bucket is not None:
                bucket.record(quota, burst, -value, now)

    def max_value_in_quota_window(self, user: str, client: str) -> float:
        """What one request may use without a certain throttle when nothing was recorded
        (Kafka's ``getMaxValueInQuotaWindow``): quota x (samples - 1) x window; inf without a quota."""
        found = self.quota_for(user, client) if self.quotas else None
        return found[0] * (self.samples - 1) * self.window_ms / 1000.0 if found is not None else float("inf")

    def bucket_for(self, tags: tuple[str, str]) -> TokenBucket:
        """The bucket of the rate tagged ``tags`` (created full on first use)."""
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket()
        return bucket

    def _resolve(self, user: str, client: str) -> _Resolved | None:
        found = self.quota_for(user, client)
        resolved = None
        if found is not None:
            quota, tags = found
            rate = self.rates.get(tags)
            if rate is None:
                rate = self.rates[tags] = QuotaRate(self.samples, self.window_ms)
            bucket = self.bucket_for(tags) if self.token_bucket else None
            resolved = (quota, self.burst(quota), rate, bucket)
        if len(self._resolved) > 100_000:  # many short-lived client ids: start over
            self._resolved.clear()
        self._resolved[(user, client)] = resolved
        return resolved


@dataclass(slots=True)
class TokenBucket:
    """Kafka's ``TokenBucket`` stat (KIP-599): ``tokens`` refill at the quota per second up to the
    burst; a record takes its value out (may go negative; a negative value puts it back). Starts
    full. Remembers the quota and burst it last refilled at (:meth:`settle`). Times in ms."""

    tokens: float | None = None
    last_ms: float = 0.0
    quota: float = 0.0
    burst: float = 0.0

    def refill(self, quota: float, burst: float, now_ms: float) -> float:
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        self.quota = quota
        self.burst = burst
        return self.tokens

    def record(self, quota: float, burst: float, value: float, now_ms: float) -> float:
        self.tokens = min(burst, self.refill(quota, burst, now_ms) - value)
        return self.tokens

    def settle(self, now_ms: float) -> None:
        """Refill up to ``now_ms`` at the quota last used (before that quota changes)."""
        if self.tokens is not None and now_ms > self.last_ms:
            self.refill(self.quota, self.burst, now_ms)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Kafka's ``ControllerMutationQuotaManager``: ``controller_mutation_rate`` (partitions created
    or deleted per second) with the precedence and sharing of the other quotas, measured by a
    :class:`TokenBucket` per rate instead of a ``Rate``, with KIP-599's burst (quota x samples x
    window). :meth:`bucket` is what :mod:`odradek.server.controller_mutation_quota` records into.
    Loop-only."""

    def __init__(self, samples: int = 11, window_s: float = 1.0, clock_ms: Callable[[], float] | None = None):
        super().__init__(CONTROLLER_MUTATION_RATE, samples, window_s, clock_ms, token_bucket=True)
        self.burst_windows = samples

    def bucket(self, user: str, client: str) -> tuple[float, float, TokenBucket] | None:
        """(quota, burst, the shared bucket) for sanitized ``user`` and ``client``; None: no quota."""
        found = self.quota_for(user, client) if self.quotas else None
        if found is None:
            return None
        quota, tags = found
        return quota, self.burst(quota), self.bucket_for(tags)


def parse_entity(entity_type: str, name: str) -> QuotaKey | None:
    """The level of a changed ``/config`` entity: ``users`` ``alice`` / ``alice/clients/app`` /
    ``<default>``, ``clients`` ``app``; None for a name that is not a quota entity."""
    if entity_type == "clients":
        return (_NONE, name)
    user, sep, rest = name.partition("/clients/")
    if sep:
        return (user, rest) if rest and "/" not in rest else None
    return (user, _NONE) if "/" not in name else None


def describe_name(part: str | None) -> str | None:
    """The name a level component is shown as (desanitized; ``<default>`` stays)."""
    if part is None or part == DEFAULT_ENTITY:
        return part
    return desanitize(part)


IP_QUOTA_KEYS = ("connection_creation_rate",)
QUOTA_KEY_TYPES: dict[tuple[bool, str], str] = {
    (False, PRODUCER_BYTE_RATE): "long",
    (False, CONSUMER_BYTE_RATE): "long",
    (False, REQUEST_PERCENTAGE): "double",
    (False, CONTROLLER_MUTATION_RATE): "double",
    (True, "connection_creation_rate"): "int",
}
"""(is an IP entity, key) -> Kafka's type of the quota key (``QuotaConfigs``); others are refused.
``connection_creation_rate`` is enforced by the socket server (``connection_quotas.py``)."""


class ClientQuotas:
    """The broker's managers (``produce``, ``fetch``, ``request``, ``controller_mutation``) and the
    ``/config`` handlers that feed them (``users`` and ``clients`` entities)."""

    def __init__(self, samples: int = 11, window_s: float = 1.0, clock_ms: Callable[[], float] | None = None) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s, clock_ms, token_bucket=True)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s, clock_ms, token_bucket=True)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s, clock_ms, bounded=True)
        self.controller_mutation = ControllerMutationQuotaManager(samples, window_s, clock_ms)
        self.managers: tuple[ClientQuotaManager, ...] = (
            self.produce,
            self.fetch,
            self.request,
            self.controller_mutation,
        )

    @property
    def enabled(self) -> bool:
        """Whether any quota is set (nothing is recorded while none is)."""
        return any(m.quotas for m in self.managers)

    def entity_changed(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        """A ``users``/``clients`` entity's whole config after a change (other keys ignored)."""
        level = parse_entity(entity_type, name)
        if level is None:
            return
        for manager in self.managers:
            raw = config.get(manager.quota_key)
            try:
                value = None if raw is None else float(raw)
            except ValueError:
                value = None
            manager.update_quota(level, value)

    def user_config_changed(self, name: str, config: dict[str, str]) -> None:
        self.entity_changed("users", name, config)

    def client_config_changed(self, name: str, config: dict[str, str]) -> None:
        self.entity_changed("clients", name, config)


# The first version of each API whose client backs off by itself on ``throttle_time_ms`` (KIP-219,
# Kafka's ``AbstractResponse.shouldClientThrottle``); older versions get their answer delayed
# instead. APIs not listed (those added after Kafka 2.0) always throttle client-side.
KIP_219_VERSIONS: dict[int, int] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    23: 1,  # OffsetForLeaderEpoch
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    42: 1,  # DeleteGroups
}


def client_throttles(api_key: int, api_version: int) -> bool:
    """Whether this request version's client honours ``throttle_time_ms`` (KIP-219)."""
    return api_version >= KIP_219_VERSIONS.get(api_key, 0)


@functools.lru_cache(maxsize=4096)
def _sanitized(name: str) -> str:
    return sanitize(name)


def quota_identity(principal_name: str, client_id: str | None) -> tuple[str, str]:
    """(sanitized user, sanitized client id) as the ``/config`` entities name them."""
    return _sanitized(principal_name), _sanitized(client_id or "")


def quota_config_handlers(quotas: ClientQuotas, credentials: ConfigHandler) -> dict[str, ConfigHandler]:
    """The ZkConfigManager handlers of ``users`` (SCRAM ``credentials`` and the quotas) and ``clients``."""

    async def users(name: str, config: dict[str, str]) -> None:
        result = credentials(name, config)
        if inspect.isawaitable(result):
            await result
        quotas.user_config_changed(name, config)

    return {"users": users, "clients": quotas.client_config_changed}


class QuotaRequest(Protocol):
    """Who sent a request, as the quota functions below read it (a handler's ``RequestContext``)."""

    @property
    def session(self) -> Session: ...

    @property
    def header(self) -> RequestHeader: ...


def record_quota(ctx: QuotaRequest, manager: ClientQuotaManager, value: float) -> int:
    """Record ``value`` for the request's user and client id; the throttle time in ms."""
    user, client = quota_identity(ctx.session.principal.name, ctx.header.client_id)
    return manager.record(user, client, value)


def unrecord_quota(ctx: QuotaRequest, manager: ClientQuotaManager, value: float) -> None:
    """Take back what :func:`record_quota` recorded for this request."""
    user, client = quota_identity(ctx.session.principal.name, ctx.header.client_id)
    manager.unrecord(user, client, value)


def max_quota_window_bytes(ctx: QuotaRequest, manager: ClientQuotaManager) -> float:
    """The most a consumer's Fetch may answer without a certain throttle (see
    :meth:`ClientQuotaManager.max_value_in_quota_window`)."""
    user, client = quota_identity(ctx.session.principal.name, ctx.header.client_id)
    return manager.max_value_in_quota_window(user, client)

"""KIP-599 controller mutation quotas on CreateTopics, CreatePartitions and DeleteTopics.

Kafka's ``ControllerMutationQuotaManager.newQuotaFor``: a request gets one
:class:`ControllerMutationQuota` for the user and client id that sent it, **strict** from the
versions whose clients understand THROTTLING_QUOTA_EXCEEDED (CreateTopics v6, DeleteTopics v5,
CreatePartitions v3; :data:`STRICT_SINCE`) and **permissive** before. Each topic records the
partitions it mutates (created, added, or deleted) into the user's/client's
:class:`~odradek.server.client_quotas.TokenBucket`, in request order, after its validation:

- strict: if the bucket is already below zero, the topic is not recorded and is answered
  THROTTLING_QUOTA_EXCEEDED (89) with "The throttling quota has been exceeded."; else it is
  recorded (the bucket may go below zero: a request is never split);
- permissive: always recorded and done; a bucket below zero only sets the throttle time.

The throttle time is ``round(-tokens / quota x 1000)`` ms at the violation, less the time since
(:meth:`ControllerMutationQuota.throttle_time_ms`); the handler puts it in ``ctx.throttle_ms``, so
the response carries it and the channel is muted (the request handler's quota step). Validate-only
requests record nothing. Kafka enforces this on the controller, which answers these requests in
ZooKeeper mode; odradek's broker that receives the request does (each broker keeps its own
buckets). Loop-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.protocol.api_keys import ApiKey
from odradek.server.client_quotas import quota_identity

if TYPE_CHECKING:
    from odradek.server.client_quotas import TokenBucket
    from odradek.server.request import RequestContext

__all__ = ["STRICT_SINCE", "THROTTLING_QUOTA_EXCEEDED_MESSAGE", "ControllerMutationQuota", "controller_mutation_quota"]

STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3}
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class ControllerMutationQuota:
    """One request's quota (Kafka's ``Strict``/``PermissiveControllerMutationQuota``)."""

    def __init__(
        self, quota: float, burst: float, bucket: TokenBucket, strict: bool, clock_ms: Callable[[], float]
    ) -> None:
        self.quota = quota
        self.burst = burst
        self.bucket = bucket
        self.strict = strict
        self._now = clock_ms
        self.last_throttle_ms = 0
        self.recorded_at_ms = 0.0

    def _violated(self, tokens: float, now: float) -> None:
        self.last_throttle_ms = round(-tokens / self.quota * 1000) if self.quota > 0 else 1000
        self.recorded_at_ms = now

    def record(self, permits: int, now_ms: float | None = None) -> bool:
        """Record ``permits`` partitions; False when a strict quota refuses them (not recorded)."""
        now = self._now() if now_ms is None else now_ms
        if self.strict:
            tokens = self.bucket.refill(self.quota, self.burst, now)
            if tokens < 0:
                self._violated(tokens, now)
                return False
            self.bucket.record(self.quota, self.burst, permits, now)
            return True
        tokens = self.bucket.record(self.quota, self.burst, permits, now)
        if tokens < 0:
            self._violated(tokens, now)
        return True

    def throttle_time_ms(self, now_ms: float | None = None) -> int:
        """The throttle of the last violation, less the time since (Kafka's ``throttleTime``)."""
        if self.last_throttle_ms <= 0:
            return 0
        now = self._now() if now_ms is None else now_ms
        return max(0, round(self.last_throttle_ms - (now - self.recorded_at_ms)))


def controller_mutation_quota(ctx: RequestContext) -> ControllerMutationQuota | None:
    """The request's quota, or None when no ``controller_mutation_rate`` applies to its sender."""
    manager = ctx.services.client_quotas.controller_mutation
    if not manager.quotas:
        return None
    user, client = quota_identity(ctx.session.principal.name, ctx.header.client_id)
    found = manager.bucket(user, client)
    if found is None:
        return None
    quota, burst, bucket = found
    strict = ctx.api_version >= STRICT_SINCE[ApiKey(ctx.header.api_key)]
    return ControllerMutationQuota(quota, burst, bucket, strict, manager.clock_ms)

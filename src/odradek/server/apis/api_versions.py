"""ApiVersions (key 18): the API keys and version ranges this broker supports.

v0..v4. A request at a version above our maximum is answered in v0 format with
UNSUPPORTED_VERSION and the full table (KIP-511), whatever version the client used, so the
client can pick a version we support and ask again.

v3+ also carry the features (KIP-584, tagged fields): ``group.version`` 0..1 supported and
finalized at level 1 (the consumer group protocol of KIP-848 is served; Kafka gates it with this
feature) and ``share.version`` 0..1 finalized at level 1 (share groups, KIP-932, likewise), at a
constant finalized-features epoch. As Kafka, v3 leaves out a supported feature whose minimum is 0,
so both are listed as supported from v4 (their finalized levels in both).
"""

from __future__ import annotations

import datetime
import struct
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import ApiVersionsRequest

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4


def supported_versions() -> list[tuple[int, int, int]]:
    """(API key, min, max) of every served API in key order, without importing their handlers."""
    from odradek.server.apis import ADVERTISED_VERSIONS

    return [(key, low, high) for key, (low, high) in ADVERTISED_VERSIONS.items()]


FEATURES: dict[str, tuple[int, int, int]] = {"group.version": (0, 1, 1), "share.version": (0, 1, 1)}
"""Feature name -> (min supported, max supported, finalized level)."""
FINALIZED_FEATURES_EPOCH = 0
"""The finalized features never change while the broker runs."""


async def handle(ctx: RequestContext[ApiVersionsRequest]) -> Any:
    keys = tuple(
        ctx.make("ApiVersion", api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()
    )
    if ctx.api_version < 3:
        return ctx.response(error_code=ErrorCode.none, api_keys=keys, throttle_time=datetime.timedelta(0))
    supported = tuple(
        ctx.make("SupportedFeatureKey", name=name, min_version=low, max_version=high)
        for name, (low, high, _) in FEATURES.items()
        if low > 0 or ctx.api_version >= 4
    )
    finalized = tuple(
        ctx.make("FinalizedFeatureKey", name=name, max_version_level=level, min_version_level=level)
        for name, (_, _, level) in FEATURES.items()
    )
    return ctx.response(
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=supported,
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=finalized,
        zk_migration_ready=False,
    )


def unsupported_version_response(correlation_id: int) -> bytes:
    """A complete v0 ApiVersions response frame with UNSUPPORTED_VERSION (KIP-511)."""
    table = supported_versions()
    body = struct.pack(">ihi", correlation_id, ErrorCode.unsupported_version, len(table))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, lo, hi in table)
    return struct.pack(">i", len(body)) + body

"""ApiVersions (key 18): the API keys and version ranges this broker supports.

v0..v4. A request at a version above our maximum is answered in v0 format with
UNSUPPORTED_VERSION and the full table (KIP-511), whatever version the client used, so the
client can pick a version we support and ask again.
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
    from odradek.server.apis import API_HANDLERS

    return sorted((key, m.MIN_VERSION, m.MAX_VERSION) for key, m in API_HANDLERS.items())


async def handle(ctx: RequestContext[ApiVersionsRequest]) -> Any:
    keys = tuple(
        ctx.make("ApiVersion", api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()
    )
    return ctx.response(
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


def unsupported_version_response(correlation_id: int) -> bytes:
    """A complete v0 ApiVersions response frame with UNSUPPORTED_VERSION (KIP-511)."""
    table = supported_versions()
    body = struct.pack(">ihi", correlation_id, ErrorCode.unsupported_version, len(table))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, lo, hi in table)
    return struct.pack(">i", len(body)) + body

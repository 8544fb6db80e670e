"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx: RequestContext) -> response | bytes | None``.

``API_HANDLERS`` maps API key to module; ApiVersions answers from it, and
``docs/compatibility.md`` is checked against it by a unit test.
"""

from __future__ import annotations

from types import ModuleType

from odradek.server.apis import (
    api_versions,
    fetch,
    list_offsets,
    metadata,
    produce,
)

_MODULES: list[ModuleType] = [
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
]

API_HANDLERS: dict[int, ModuleType] = {m.API_KEY: m for m in _MODULES}

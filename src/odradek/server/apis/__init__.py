"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx: RequestContext) -> response | bytes | None``.

``API_HANDLERS`` maps API key to module; ApiVersions answers from it, and
``docs/compatibility.md`` is checked against it by a unit test.
"""

from __future__ import annotations

from types import ModuleType

from odradek.server.apis import (
    alter_configs,
    api_versions,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    stop_replica,
    sync_group,
    update_metadata,
)

_MODULES: list[ModuleType] = [
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    leader_and_isr,
    elect_leaders,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    api_versions,
    init_producer_id,
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
]

API_HANDLERS: dict[int, ModuleType] = {m.API_KEY: m for m in _MODULES}

"""build_components on the embedded in-memory store and a temporary log directory: no sockets."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.client.security import PLAINTEXT_SECURITY
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.server.components import build_components
from odradek.server.config import KafkaConfig
from odradek.server.metadata_cache import MetadataCache
from odradek.storage import LogManager, TopicPartition


def test_build_components_wires_each_component_from_the_broker_config(tmp_path: Path) -> None:
    config = KafkaConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "broker.id": "3",
            "log.dirs": str(tmp_path),
            "num.replica.fetchers": "2",
            "replica.lag.time.max.ms": "1234",
            "offsets.topic.num.partitions": "7",
            "transaction.state.log.num.partitions": "5",
        }
    )

    async def main() -> None:
        zk = KafkaZkClient(EmbeddedStore().session())
        log_manager = LogManager([tmp_path], config.default_log_config())
        cache = MetadataCache(config.inter_broker_listener_name)

        async def create_internal_topic(*_args: object) -> None:
            raise AssertionError("no internal topic is created while the components are built")

        async def isr_writer(*_args: object) -> int | None:
            return None

        components = build_components(
            config,
            zk,
            log_manager,
            cache,
            log_config_for=lambda _topic: config.default_log_config(),
            isr_writer=isr_writer,
            endpoint_for=lambda _broker_id: None,
            create_internal_topic=create_internal_topic,
            local_address=lambda: ("127.0.0.1", 9092),
            inter_broker_security=PLAINTEXT_SECURITY,
        )
        try:
            assert components.zk is zk
            rm = components.replica_manager
            assert (rm.broker_id, rm.replica_lag_time_max_ms, rm.log_manager) == (3, 1234, log_manager)
            assert rm.fetcher_manager.config.num_fetchers == 2
            assert not rm.partition_exists(TopicPartition("t", 0))  # asks the metadata cache
            assert components.group_coordinator.config.offsets_partitions == 7
            assert components.transaction_coordinator.config.num_partitions == 5
            first = await components.producer_ids.generate_producer_id()
            assert await components.producer_ids.generate_producer_id() == first + 1
            assert await zk.store.exists("/latest_producer_id_block") is not None  # the block is in the store
        finally:
            rm.shutdown()
            log_manager.shutdown()

    asyncio.run(main())

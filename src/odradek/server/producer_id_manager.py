"""Producer id allocation (Kafka's ``ZkProducerIdManager``).

Ids are handed out from blocks reserved in the metadata store at ``/latest_producer_id_block``
(``KafkaZkClient.allocate_producer_id_block``: a conditional write, so two brokers never reserve
the same block). A broker restart reserves a fresh block; ids are never reused.

Runs on the broker's event loop.
"""

from __future__ import annotations

from odradek.metadata.kafka_zk_client import KafkaZkClient

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, broker_id: int, zk: KafkaZkClient) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self._next = 0
        self._end = -1

    async def generate_producer_id(self) -> int:
        if self._next > self._end:
            block = await self.zk.allocate_producer_id_block(self.broker_id, BLOCK_SIZE)
            self._next, self._end = block.block_start, block.block_end
        pid = self._next
        self._next += 1
        return pid

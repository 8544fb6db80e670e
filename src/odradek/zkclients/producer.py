"""``Producer(zookeeper_connect=...)``: odradek's producer with its brokers and partitions read from
ZooKeeper (:class:`~odradek.zkclients.broker_partition_info.ZkBrokerPartitionInfo`) instead of
bootstrap servers (``zookeeper_tls``: a TLS context for that ZooKeeper session). Everything else is
:class:`odradek.client.producer.Producer` (``security``, a :class:`~odradek.client.security.ClientSecurity`,
is how it connects to the brokers it finds). Belongs to one event loop."""

from __future__ import annotations

import ssl
from typing import Any

from odradek.client.producer import Producer as _Producer
from odradek.client.security import PLAINTEXT_SECURITY
from odradek.zkclients.broker_partition_info import ZkBrokerPartitionInfo

__all__ = ["Producer"]


class Producer(_Producer):
    def __init__(
        self,
        *,
        zookeeper_connect: str,
        zookeeper_session_timeout_ms: int = 6000,
        zookeeper_tls: ssl.SSLContext | None = None,
        **config: Any,
    ) -> None:
        cluster = ZkBrokerPartitionInfo(
            zookeeper_connect,
            zookeeper_session_timeout_ms=zookeeper_session_timeout_ms,
            zookeeper_tls=zookeeper_tls,
            client_id=config.get("client_id", "odradek-producer"),
            request_timeout_ms=config.get("request_timeout_ms", 30000),
            retries=config.get("retries", 5),
            security=config.get("security", PLAINTEXT_SECURITY),
        )
        super().__init__("", cluster=cluster, **config)
        self.broker_partition_info = cluster

"""Helpers shared by the admin API test modules: a module-scoped broker, odradek's own admin
client and connection run to completion, and one long-lived confluent AdminClient per broker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic

from odradek.client.admin import AdminClient
from odradek.client.connection import KafkaConnection
from odradek.testing import BrokerRunner

T = TypeVar("T")

_ADMINS: dict[str, ConfluentAdmin] = {}


def module_broker(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[BrokerRunner]:
    """Body of a module-scoped broker fixture (stops the broker and forgets its admin client)."""
    runner = BrokerRunner(str(tmp_path_factory.mktemp(name))).start()
    try:
        yield runner
    finally:
        _ADMINS.pop(runner.bootstrap_servers, None)
        runner.stop()


def with_admin(broker: BrokerRunner, fn: Callable[[AdminClient], Awaitable[T]]) -> T:
    async def go() -> T:
        async with AdminClient(broker.bootstrap_servers) as admin:
            return await fn(admin)

    return asyncio.run(go())


def with_conn(broker: BrokerRunner, fn: Callable[[KafkaConnection], Awaitable[T]]) -> T:
    host, port = broker.bootstrap_servers.split(":")

    async def go() -> T:
        async with KafkaConnection(host, int(port)) as conn:
            return await fn(conn)

    return asyncio.run(go())


def confluent(broker: BrokerRunner) -> ConfluentAdmin:
    """One AdminClient per broker, kept alive (a collected client fails its pending futures)."""
    admin = _ADMINS.get(broker.bootstrap_servers)
    if admin is None:
        admin = _ADMINS[broker.bootstrap_servers] = ConfluentAdmin({"bootstrap.servers": broker.bootstrap_servers})
    return admin


def error_code_of(future: Any) -> int:
    try:
        future.result(15)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def create(broker: BrokerRunner, name: str, partitions: int = 1, **config: str) -> None:
    fs = confluent(broker).create_topics([NewTopic(name, partitions, 1, config=config)], operation_timeout=10)
    fs[name].result(15)

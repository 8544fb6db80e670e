"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs of GROUP resources (type 32) on fakes
of their services, and their authorization by a real AclAuthorizer."""

from __future__ import annotations

import asyncio

from kio.schema.alter_configs.v2 import request as alter_v2
from kio.schema.describe_configs.v4 import request as describe_v4
from kio.schema.incremental_alter_configs.v1 import request as incremental_v1

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.embedded import EmbeddedStore
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.server.apis import alter_configs, describe_configs, incremental_alter_configs
from odradek.server.apis.describe_configs import DEFAULT_CONFIG, GROUP_CONFIG, RESOURCE_GROUP

from .api_fakes import FakeServices, call, context

SET, DELETE, APPEND = 0, 1, 2
KEY = ("groups", "g%2F1")  # /config/groups/<sanitized "g/1">


def _describe(name: str, keys: tuple[str, ...] | None = None) -> describe_v4.DescribeConfigsRequest:
    return describe_v4.DescribeConfigsRequest(
        resources=(
            describe_v4.DescribeConfigsResource(
                resource_type=RESOURCE_GROUP, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=True,
        include_documentation=True,
    )


def _incremental(name: str, *ops: tuple[str, int, str | None]) -> incremental_v1.IncrementalAlterConfigsRequest:
    return incremental_v1.IncrementalAlterConfigsRequest(
        resources=(
            incremental_v1.AlterConfigsResource(
                resource_type=RESOURCE_GROUP,
                resource_name=name,
                configs=tuple(incremental_v1.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops),
            ),
        ),
        validate_only=False,
    )


def test_describe_reports_each_group_key_with_its_override_or_the_broker_default() -> None:
    services = FakeServices()
    services.zk.entity_configs[KEY] = {"consumer.session.timeout.ms": "50000"}
    (result,) = call(describe_configs, services, 4, _describe("g/1")).results
    assert (result.error_code, result.resource_type, result.resource_name) == (ErrorCode.none, 32, "g/1")
    entries = {c.name: c for c in result.configs}
    assert list(entries) == sorted(entries) and len(entries) == 7
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.config_source, session.read_only, session.is_sensitive) == (
        "50000",
        GROUP_CONFIG,
        False,
        False,
    )
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("consumer.session.timeout.ms", "50000", GROUP_CONFIG)
    ]
    heartbeat = entries["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.config_source, heartbeat.config_type) == ("5000", DEFAULT_CONFIG, 3)
    assert entries["share.auto.offset.reset"].value == "latest" and entries["share.auto.offset.reset"].documentation
    only = call(describe_configs, services, 4, _describe("other", ("share.isolation.level", "nope"))).results[0]
    assert [(c.name, c.value, c.config_source) for c in only.configs] == [
        ("share.isolation.level", "read_uncommitted", DEFAULT_CONFIG)
    ]
    empty = call(describe_configs, services, 4, _describe("")).results[0]
    assert (empty.error_code, empty.configs) == (ErrorCode.invalid_request, ())


def test_incremental_alter_sets_and_deletes_group_configs_and_applies_them_here() -> None:
    services = FakeServices()
    response = call(
        incremental_alter_configs,
        services,
        1,
        _incremental(
            "g/1", ("consumer.session.timeout.ms", SET, "50000"), ("share.isolation.level", SET, "read_committed")
        ),
    )
    assert [(r.error_code, r.resource_type) for r in response.responses] == [(ErrorCode.none, 32)]
    assert services.zk.entity_configs[KEY] == {
        "consumer.session.timeout.ms": "50000",
        "share.isolation.level": "read_committed",
    }
    assert services.group_configs.get("g/1").consumer_session_timeout_ms == 50000
    call(incremental_alter_configs, services, 1, _incremental("g/1", ("consumer.session.timeout.ms", DELETE, None)))
    assert services.zk.entity_configs[KEY] == {"share.isolation.level": "read_committed"}
    assert services.group_configs.get("g/1").consumer_session_timeout_ms == 45000


def test_incremental_alter_refuses_what_kafka_refuses_and_writes_nothing() -> None:
    services = FakeServices()
    cases = [
        (("consumer.session.timeout.ms", SET, "1000"), ErrorCode.invalid_config),  # below the broker's minimum
        (("consumer.heartbeat.interval.ms", SET, "45000"), ErrorCode.invalid_config),  # above the maximum
        (("session.timeout.ms", SET, "50000"), ErrorCode.invalid_config),  # not a group key
        (("share.auto.offset.reset", SET, "by_duration:1h"), ErrorCode.invalid_config),
        (("share.isolation.level", APPEND, "read_committed"), ErrorCode.invalid_config),  # not a list
        (("consumer.session.timeout.ms", SET, None), ErrorCode.invalid_request),
    ]
    for op, error in cases:
        response = call(incremental_alter_configs, services, 1, _incremental("g/1", op))
        assert response.responses[0].error_code == error, op
    empty = call(incremental_alter_configs, services, 1, _incremental("", ("share.isolation.level", SET, "x")))
    assert empty.responses[0].error_code == ErrorCode.invalid_request
    assert services.zk.entity_configs == {}
    assert services.group_configs.get("g/1") is services.group_configs.defaults


def test_alter_configs_replaces_a_groups_configs() -> None:
    services = FakeServices()
    services.zk.entity_configs[KEY] = {"consumer.session.timeout.ms": "50000"}

    def alter(validate_only: bool, **configs: str) -> ErrorCode:
        request = alter_v2.AlterConfigsRequest(
            resources=(
                alter_v2.AlterConfigsResource(
                    resource_type=RESOURCE_GROUP,
                    resource_name="g/1",
                    configs=tuple(
                        alter_v2.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()
                    ),
                ),
            ),
            validate_only=validate_only,
        )
        return ErrorCode(call(alter_configs, services, 2, request).responses[0].error_code)

    assert alter(True, share_heartbeat_interval_ms="6000") is ErrorCode.none
    assert services.zk.entity_configs[KEY] == {"consumer.session.timeout.ms": "50000"}  # validated only
    assert alter(False, share_heartbeat_interval_ms="6000") is ErrorCode.none
    assert services.zk.entity_configs[KEY] == {"share.heartbeat.interval.ms": "6000"}
    assert services.group_configs.get("g/1").share_heartbeat_interval_ms == 6000
    assert alter(False, share_heartbeat_interval_ms="1") is ErrorCode.invalid_config


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group() -> None:
    async def main() -> None:
        authorizer = AclAuthorizer(EmbeddedStore().session())
        await authorizer.start()
        principal = "User:ANONYMOUS"
        await authorizer.create_acls(
            [
                AclBinding(
                    ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED),
                    AccessControlEntry(principal, "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW),
                )
            ]
        )
        services = FakeServices(authorizer=authorizer)

        async def describe(name: str) -> int:
            request = _describe(name)
            response = await describe_configs.handle(context(services, describe_configs.API_KEY, 4, request))
            return int(response.results[0].error_code)

        async def alter(name: str) -> int:
            request = _incremental(name, ("share.isolation.level", SET, "read_committed"))
            response = await incremental_alter_configs.handle(
                context(services, incremental_alter_configs.API_KEY, 1, request)
            )
            return int(response.responses[0].error_code)

        # ALTER_CONFIGS implies DESCRIBE_CONFIGS, as Kafka's authorizer has it
        assert await describe("app-1") == ErrorCode.none and await alter("app-1") == ErrorCode.none
        assert await describe("other") == ErrorCode.group_authorization_failed
        assert await alter("other") == ErrorCode.group_authorization_failed
        await authorizer.close()

    asyncio.run(main())

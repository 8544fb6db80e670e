"""DescribeConfigs and AlterConfigs on fakes of their services (no authorizer)."""

from __future__ import annotations

from kio.schema.alter_configs.v2 import request as alter_v2
from kio.schema.describe_configs.v4 import request as describe_v4

from odradek.errors import ErrorCode
from odradek.server.apis import alter_configs, describe_configs
from odradek.server.apis.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC

from .api_fakes import FakeMetadataCache, FakeServices, call

DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5


def _describe(*resources: tuple[int, str, tuple[str, ...] | None]) -> describe_v4.DescribeConfigsRequest:
    return describe_v4.DescribeConfigsRequest(
        resources=tuple(
            describe_v4.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
            for t, n, keys in resources
        ),
        include_synonyms=False,
        include_documentation=False,
    )


def test_describe_configs_of_a_topic_reports_overrides_and_defaults_with_their_sources() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    services.admin.overrides["t"] = {"retention.ms": "1000"}
    response = call(describe_configs, services, 4, _describe((RESOURCE_TOPIC, "t", ("retention.ms", "cleanup.policy"))))
    (result,) = response.results
    assert (result.error_code, result.resource_name) == (ErrorCode.none, "t")
    entries = {c.name: (c.value, c.config_source) for c in result.configs}
    assert entries == {"retention.ms": ("1000", DYNAMIC_TOPIC_CONFIG), "cleanup.policy": ("delete", DEFAULT_CONFIG)}


def test_describe_configs_answers_each_resources_error() -> None:
    services = FakeServices()
    response = call(
        describe_configs,
        services,
        4,
        _describe((RESOURCE_TOPIC, "missing", None), (RESOURCE_BROKER, "2", None), (RESOURCE_TOPIC, "bad name", None)),
    )
    assert [r.error_code for r in response.results] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request,
        ErrorCode.invalid_topic_exception,
    ]
    assert all(r.configs == () for r in response.results)


def _alter(name: str, validate_only: bool, *configs: tuple[str, str | None]) -> alter_v2.AlterConfigsRequest:
    return alter_v2.AlterConfigsRequest(
        resources=(
            alter_v2.AlterConfigsResource(
                resource_type=RESOURCE_TOPIC,
                resource_name=name,
                configs=tuple(alter_v2.AlterableConfig(name=k, value=v) for k, v in configs),
            ),
        ),
        validate_only=validate_only,
    )


def test_alter_configs_stores_a_topics_overrides_or_only_validates_them() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    response = call(alter_configs, services, 2, _alter("t", False, ("retention.ms", "5")))
    assert [(r.error_code, r.resource_name) for r in response.responses] == [(ErrorCode.none, "t")]
    assert services.admin.overrides == {"t": {"retention.ms": "5"}}
    call(alter_configs, services, 2, _alter("t", True, ("retention.ms", "6")))
    assert services.admin.validated == [("t", {"retention.ms": "6"})]
    assert services.admin.overrides == {"t": {"retention.ms": "5"}}


def test_alter_configs_refuses_null_values_duplicate_keys_and_unknown_topics() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    null = call(alter_configs, services, 2, _alter("t", False, ("retention.ms", None)))
    twice = call(alter_configs, services, 2, _alter("t", False, ("retention.ms", "1"), ("retention.ms", "2")))
    missing = call(alter_configs, services, 2, _alter("nope", False, ("retention.ms", "1")))
    assert [r.responses[0].error_code for r in (null, twice, missing)] == [
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert services.admin.overrides == {}

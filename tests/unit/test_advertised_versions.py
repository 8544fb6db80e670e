"""ApiVersions advertises one Kafka release: 3.9's maxima, and 3.9's minima where a codec exists."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema
from odradek.server.apis import (
    ADVERTISED_VERSIONS,
    API_HANDLERS,
    KAFKA_3_9_VERSIONS,
    KAFKA_4_0_MINIMA,
    KAFKA_4_GROUP_VERSIONS,
    SERVED_VERSIONS,
    handler,
    handler_module_name,
)


def test_every_served_api_is_a_kafka_3_9_api_with_its_maximum() -> None:
    assert set(API_HANDLERS) <= set(SERVED_VERSIONS)
    for key, module in API_HANDLERS.items():
        low, high = SERVED_VERSIONS[key]
        assert high == module.MAX_VERSION, f"api key {key}: advertises {module.MAX_VERSION}, Kafka {high}"
        assert KAFKA_4_0_MINIMA.get(key, low) == module.MIN_VERSION, f"api key {key}: minimum {module.MIN_VERSION}"


@pytest.mark.parametrize("key", sorted(KAFKA_4_0_MINIMA))
def test_minima_above_3_9_are_versions_without_a_codec(key: int) -> None:
    # The raised minimum is honest only while the versions below it really cannot be decoded.
    from odradek.errors import UnsupportedVersionError

    for version in range(KAFKA_3_9_VERSIONS[key][0], KAFKA_4_0_MINIMA[key]):
        with pytest.raises(UnsupportedVersionError):
            api_schema(key, version)


def test_the_only_apis_past_3_9_are_the_kafka_4_group_ones() -> None:
    assert set(API_HANDLERS) - set(KAFKA_3_9_VERSIONS) == set(KAFKA_4_GROUP_VERSIONS)
    # ConsumerGroupHeartbeat/Describe (68, 69); ShareGroupHeartbeat/Describe, ShareFetch,
    # ShareAcknowledge (76-79); the share coordinator's state APIs (83-87); share group offsets (90-92)
    assert {int(k) for k in KAFKA_4_GROUP_VERSIONS} <= {68, 69, 76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}


def test_every_advertised_version_has_a_codec() -> None:
    for key, module in API_HANDLERS.items():
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):
            assert api_schema(key, version).version == version


def test_the_static_version_table_is_every_handler_s_constants() -> None:
    """ApiVersions and the version check read ADVERTISED_VERSIONS without importing the handlers."""
    assert list(ADVERTISED_VERSIONS) == sorted(API_HANDLERS)
    for key, module in API_HANDLERS.items():
        assert key == module.API_KEY, module.__name__
        assert module.__name__ == handler_module_name(key)
        assert ADVERTISED_VERSIONS[key] == (module.MIN_VERSION, module.MAX_VERSION), module.__name__
        assert handler(key) is module


def test_an_api_not_served_has_no_handler() -> None:
    assert ApiKey.ENVELOPE not in ADVERTISED_VERSIONS
    with pytest.raises(KeyError):
        handler(ApiKey.ENVELOPE)

"""ApiVersions advertises one Kafka release: 3.9's maxima, and 3.9's minima where a codec exists."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema
from odradek.server.apis import API_HANDLERS, KAFKA_3_9_VERSIONS, KAFKA_4_0_MINIMA, SERVED_VERSIONS


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
    assert set(API_HANDLERS) - set(KAFKA_3_9_VERSIONS) == {
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE,
        ApiKey.DELETE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    }


def test_every_advertised_version_has_a_codec() -> None:
    for key, module in API_HANDLERS.items():
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):
            assert api_schema(key, version).version == version

"""Group configs (Kafka 4's GROUP config resource): validation against the broker's bounds, the
share keys' values, and the lookup every broker keeps up to date from ``/config/changes``."""

from __future__ import annotations

import logging

import pytest

from odradek.coordinator.group.group_config import (
    GROUP_CONFIGS,
    GroupConfig,
    GroupConfigs,
    parse_iso_duration_ms,
    parse_share_auto_offset_reset,
    validate_group_config,
)
from odradek.errors import InvalidConfigError
from odradek.metadata.config_entities import sanitize
from odradek.server.config import BROKER_CONFIGS, KafkaConfig

BROKER = KafkaConfig(
    {
        "group.consumer.session.timeout.ms": "20000",
        "group.consumer.min.session.timeout.ms": "10000",
        "group.consumer.heartbeat.interval.ms": "3000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        "group.share.record.lock.duration.ms": "20000",
    }
)


def test_the_broker_keys_are_kafkas_and_give_the_group_defaults() -> None:
    defaults = KafkaConfig({})
    assert {k: defaults[k] for k in BROKER_CONFIGS.keys if k.startswith("group.share.")} == {
        "group.share.enable": False,
        "group.share.session.timeout.ms": 45000,
        "group.share.min.session.timeout.ms": 45000,
        "group.share.max.session.timeout.ms": 60000,
        "group.share.heartbeat.interval.ms": 5000,
        "group.share.min.heartbeat.interval.ms": 5000,
        "group.share.max.heartbeat.interval.ms": 15000,
        "group.share.max.size": 200,
        "group.share.record.lock.duration.ms": 30000,
        "group.share.min.record.lock.duration.ms": 15000,
        "group.share.max.record.lock.duration.ms": 60000,
        "group.share.delivery.count.limit": 5,
        "group.share.partition.max.record.locks": 2000,
        "group.share.max.share.sessions": 2000,
    }
    assert GroupConfigs(defaults).get("any") == GroupConfig()
    assert GroupConfigs(BROKER).defaults == GroupConfig(
        consumer_session_timeout_ms=20000, consumer_heartbeat_interval_ms=3000, share_record_lock_duration_ms=20000
    )
    assert list(GROUP_CONFIGS.keys) == [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("group.share.session.timeout.ms", "40000"),  # below group.share.min.session.timeout.ms
        ("group.share.heartbeat.interval.ms", "16000"),
        ("group.share.record.lock.duration.ms", "70000"),
        ("group.share.max.size", "1001"),
        ("group.share.delivery.count.limit", "11"),
    ],
)
def test_share_broker_keys_out_of_their_bounds_stop_the_broker(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        KafkaConfig({key: value})


def test_valid_overrides_give_the_groups_effective_config() -> None:
    config = validate_group_config(
        {
            "consumer.session.timeout.ms": "12000",
            "consumer.heartbeat.interval.ms": "1000",
            "share.auto.offset.reset": "by_duration:PT1H30M",
            "share.isolation.level": "read_committed",
        },
        BROKER,
    )
    assert config.consumer_session_timeout_ms == 12000 and config.consumer_heartbeat_interval_ms == 1000
    assert config.share_record_lock_duration_ms == 20000  # the broker's default
    assert config.share_auto_offset_reset_strategy() == ("by_duration", 5_400_000)
    assert config.share_read_committed
    assert config.values()["share.isolation.level"] == "read_committed"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"session.timeout.ms": "1"}, "Unknown group config name: session.timeout.ms"),
        ({"consumer.session.timeout.ms": "9999"}, "must be greater than or equal to group.consumer.min.session"),
        ({"consumer.session.timeout.ms": "60001"}, "must be less than or equal to group.consumer.max.session"),
        ({"consumer.heartbeat.interval.ms": "999"}, "greater than or equal to group.consumer.min.heartbeat"),
        ({"consumer.heartbeat.interval.ms": "15001"}, "less than or equal to group.consumer.max.heartbeat"),
        ({"consumer.session.timeout.ms": "12000", "consumer.heartbeat.interval.ms": "12000"}, "must be greater than"),
        ({"consumer.session.timeout.ms": "ten"}, "expected a value of type int"),
        ({"consumer.session.timeout.ms": "0"}, "must be at least 1"),
        ({"share.session.timeout.ms": "44999"}, "group.share.min.session.timeout.ms"),
        ({"share.heartbeat.interval.ms": "15001"}, "group.share.max.heartbeat.interval.ms"),
        ({"share.record.lock.duration.ms": "14999"}, "group.share.min.record.lock.duration.ms"),
        ({"share.record.lock.duration.ms": "999"}, "must be at least 1000"),
        ({"share.auto.offset.reset": "LATEST"}, "'earliest', 'latest' or of the format"),
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "'earliest', 'latest' or of the format"),
        ({"share.isolation.level": "read_none"}, "must be one of read_committed, read_uncommitted"),
    ],
)
def test_invalid_overrides_are_refused_with_kafkas_sentences(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(")):
        validate_group_config(overrides, BROKER)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("pt1h", 3_600_000),
        ("P2D", 172_800_000),
        ("P1DT2H3M4.5S", 93_784_500),
        ("PT0.0019S", 1),
        ("PT-1S", -1000),
        ("-PT1S", -1000),
        ("PT1M-30S", 30_000),
        ("PT-0.5S", -500),
        ("PT0S", 0),
    ],
)
def test_iso_durations_read_as_javas(text: str, ms: int) -> None:
    assert parse_iso_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1H", "PT1.5H", "P1W", "PT1H ", "PT\uff11H"])
def test_iso_durations_javas_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso_duration_ms(text)


def test_share_auto_offset_reset_values_as_kafka() -> None:
    assert parse_share_auto_offset_reset("latest") == ("latest", None)
    assert parse_share_auto_offset_reset("earliest") == ("earliest", None)
    assert parse_share_auto_offset_reset("by_duration:P1D") == ("by_duration", 86_400_000)
    for bad in ("by_duration", "by_duration:", "by_duration:-PT1H", "Earliest", "none"):
        with pytest.raises(ValueError):
            parse_share_auto_offset_reset(bad)


def test_the_lookup_follows_each_groups_stored_overrides() -> None:
    configs = GroupConfigs(BROKER)
    changed: list[str] = []
    configs.listeners.append(changed.append)
    default = configs.get("g")
    assert default is configs.defaults and configs.overrides("g") == {}
    configs.process_config_changes(sanitize("g/ü"), {"consumer.heartbeat.interval.ms": "2000"})
    assert configs.get("g/ü").consumer_heartbeat_interval_ms == 2000
    assert configs.get("g/ü") is configs.get("g/ü")  # one dict lookup, no rebuilding
    assert configs.get("g") is default
    assert configs.overrides("g/ü") == {"consumer.heartbeat.interval.ms": "2000"}
    configs.process_config_changes(sanitize("g/ü"), {})  # every override deleted
    assert configs.get("g/ü") is configs.defaults and configs.overrides("g/ü") == {}
    assert changed == ["g/ü", "g/ü"]


def test_stored_values_that_no_longer_fit_are_skipped_or_capped(caplog: pytest.LogCaptureFixture) -> None:
    configs = GroupConfigs(BROKER)
    with caplog.at_level(logging.WARNING):
        config = configs.update(
            "g",
            {
                "consumer.session.timeout.ms": "90000",  # above group.consumer.max.session.timeout.ms
                "consumer.heartbeat.interval.ms": "soon",
                "streams.num.standby.replicas": "1",
            },
        )
    assert config.consumer_session_timeout_ms == 60000
    assert config.consumer_heartbeat_interval_ms == 3000
    assert "outside the broker's bounds" in caplog.text and "unknown group config" in caplog.text

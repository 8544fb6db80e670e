"""Group configs: the ``GROUP`` config resource (type 32) of Kafka 4.x's ``GroupConfig`` and
``GroupConfigManager``, and the broker keys that give their defaults and bounds.

:data:`GROUP_BROKER_CONFIGS` holds the broker's ``group.*`` keys (``server.properties``; the broker
config table includes it), among them ``group.consumer.migration.policy``
(:class:`ConsumerGroupMigrationPolicy`). :data:`GROUP_CONFIGS` holds the keys a group may
override (Kafka 4.2's non-streams ``GroupConfig`` keys); each takes its default from a broker key
and, where Kafka bounds it, must lie within that key's ``min``/``max`` keys:

- ``consumer.session.timeout.ms``: default ``group.consumer.session.timeout.ms``, within
  ``group.consumer.min.session.timeout.ms`` and ``group.consumer.max.session.timeout.ms``;
- ``consumer.heartbeat.interval.ms``: default ``group.consumer.heartbeat.interval.ms``, within
  ``group.consumer.{min,max}.heartbeat.interval.ms``;
- ``share.session.timeout.ms`` / ``share.heartbeat.interval.ms`` / ``share.record.lock.duration.ms``:
  defaults ``group.share.session.timeout.ms`` / ``group.share.heartbeat.interval.ms`` /
  ``group.share.record.lock.duration.ms``, within their ``group.share.{min,max}.*`` keys;
- ``share.auto.offset.reset``: ``latest`` (default), ``earliest`` or ``by_duration:<ISO-8601 duration>``;
- ``share.isolation.level``: ``read_uncommitted`` (default) or ``read_committed``;

and a session timeout must exceed its heartbeat interval. :func:`validate_group_config` checks
overrides as Kafka's ``GroupConfig.validate`` does (merged over the broker's defaults) and raises
:class:`~odradek.errors.InvalidConfigError` with Kafka's sentences.

Overrides live in ``/config/groups/<sanitized group id>`` and reach every broker through
``/config/changes`` (:class:`~odradek.metadata.config_entities.ZkConfigManager` calls
:meth:`GroupConfigs.process_config_changes`). :class:`GroupConfigs` is the lookup the coordinators
use on every request: :meth:`GroupConfigs.get` is one dict lookup returning a frozen
:class:`GroupConfig` (overrides merged over the broker defaults). A stored value that no longer
parses is ignored (logged); one outside bounds the broker was restarted with is capped to them
(logged), as Kafka 4.3's ``GroupConfig.evaluate`` does.

The ``share.*`` values are for share groups (KIP-932): session timeout and heartbeat interval of
their members, how long a delivered record stays locked to its consumer, where a share-partition
starts (:func:`parse_share_auto_offset_reset`) and whether it delivers uncommitted transactional
records. Event loop only (:class:`GroupConfigs`); the rest are pure.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from odradek.configdef import ConfigDef, at_least, between, one_of
from odradek.coordinator.runtime import ConfigSource
from odradek.errors import InvalidConfigError
from odradek.metadata.config_entities import desanitize

__all__ = [
    "GROUP_BROKER_CONFIGS",
    "GROUP_CONFIGS",
    "GROUP_CONFIG_BOUNDS",
    "GROUP_CONFIG_DEFAULTS",
    "ConsumerGroupMigrationPolicy",
    "GroupConfig",
    "GroupConfigs",
    "broker_group_defaults",
    "check_broker_group_keys",
    "parse_iso_duration_ms",
    "parse_share_auto_offset_reset",
    "validate_group_config",
]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1


class ConsumerGroupMigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``): which online
    conversions of a group with members are allowed. An upgrade turns a classic group whose members
    use the ``consumer`` protocol type into a consumer group when a member joins with
    ConsumerGroupHeartbeat; a downgrade turns a consumer group back into a classic one when its
    last consumer-protocol member leaves and classic members remain. Either way of an empty group
    is allowed under every policy."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str | None) -> ConsumerGroupMigrationPolicy:
        """The policy named ``name`` in any case; DISABLED for None or an unknown name (as Kafka's
        ``parse``; the broker key refuses unknown names before this is reached)."""
        lowered = (name or "").strip().lower()
        return next((p for p in cls if p.value == lowered), cls.DISABLED)

    @property
    def upgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.BIDIRECTIONAL, ConsumerGroupMigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.BIDIRECTIONAL, ConsumerGroupMigrationPolicy.DOWNGRADE)


def _migration_policy_problem(value: Any) -> str | None:
    names = [p.value for p in ConsumerGroupMigrationPolicy]
    if value is None or str(value).strip().lower() in names:
        return None
    return f"String must be one of (case insensitive): {', '.join(names)}"


GROUP_BROKER_CONFIGS = (
    ConfigDef()
    .define(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "Wait this long for more members before the first rebalance of an empty group.",
        at_least(0),
    )
    .define("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for.")
    .define("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for.")
    .define("group.max.size", "int", _INT_MAX, "Most members in one group.", at_least(1))
    .define("group.consumer.session.timeout.ms", "int", 45000, "A consumer-protocol member's session timeout.")
    .define(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        "Smallest consumer session timeout (the broker's and a group's).",
    )
    .define(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        "Largest consumer session timeout (the broker's and a group's).",
    )
    .define("group.consumer.heartbeat.interval.ms", "int", 5000, "How often consumer-protocol members heartbeat.")
    .define(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest consumer heartbeat interval (the broker's and a group's).",
    )
    .define(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest consumer heartbeat interval (the broker's and a group's).",
    )
    .define("group.consumer.max.size", "int", _INT_MAX, "Most members in one consumer-protocol group.", at_least(1))
    .define(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Which online conversions of a group with members between the classic and the consumer protocol "
        "are allowed: bidirectional, upgrade (classic to consumer), downgrade (consumer to classic) or "
        "disabled; any case. An empty group changes kind regardless.",
        _migration_policy_problem,
    )
    .define(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "Server-side assignors of consumer-protocol groups (the first is the default): uniform, range, or "
        "Kafka's class names of them.",
    )
    .define(
        "group.share.enable",
        "boolean",
        False,
        "Kafka's internal switch of share groups (KIP-932; Kafka 4.2 enables them with the share.version "
        "feature). Accepted for share groups' use.",
    )
    .define("group.share.session.timeout.ms", "int", 45000, "A share group member's session timeout.", at_least(1))
    .define(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        "Smallest share session timeout (the broker's and a group's).",
        at_least(1),
    )
    .define(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        "Largest share session timeout (the broker's and a group's).",
        at_least(1),
    )
    .define("group.share.heartbeat.interval.ms", "int", 5000, "How often share group members heartbeat.", at_least(1))
    .define(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest share heartbeat interval (the broker's and a group's).",
        at_least(1),
    )
    .define(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest share heartbeat interval (the broker's and a group's).",
        at_least(1),
    )
    .define("group.share.max.size", "int", 200, "Most members in one share group.", between(1, 1000))
    .define(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a record delivered to a share group member stays locked to it.",
        between(1000, 3600000),
    )
    .define(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest record lock duration (the broker's and a group's).",
        between(1000, 30000),
    )
    .define(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest record lock duration (the broker's and a group's).",
        between(30000, 3600000),
    )
    .define(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a record to a share group before it is archived.",
        between(2, 10),
    )
    .define(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Records a share-partition holds locked (in flight) at most.",
        between(100, 10000),
    )
    .define(
        "group.share.max.share.sessions",
        "int",
        2000,
        "Share sessions a broker keeps at most; a new one past it is SHARE_SESSION_LIMIT_REACHED.",
        at_least(1),
    )
)
"""The broker's ``group.*`` keys (Kafka 4.2's names, defaults and ranges)."""

SHARE_AUTO_OFFSET_RESET_MESSAGE = "must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'"

_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.I,
)


def parse_iso_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PnDTnHnMn.nS``, signs allowed
    on the whole and on each part, case-insensitive), in whole milliseconds (truncated). ValueError
    for anything else, including ``P`` and ``PT`` alone."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) is not None for i in (2, 4, 5, 6)):
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    total_ns = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 10**9
    whole_s = int(seconds or 0)
    nanos = int((fraction or "").ljust(9, "0")) if fraction else 0
    total_ns += whole_s * 10**9 + (-nanos if (seconds or "").startswith("-") else nanos)
    if sign == "-":
        total_ns = -total_ns
    return total_ns // 10**6 if total_ns >= 0 else -(-total_ns // 10**6)


def parse_share_auto_offset_reset(value: str) -> tuple[str, int | None]:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.fromString``: ``("latest", None)``,
    ``("earliest", None)`` or ``("by_duration", ms)`` (reset to the first record at most that long
    ago). Lower case only, as Kafka; ValueError for anything else or a negative duration."""
    if value in ("latest", "earliest"):
        return value, None
    prefix = "by_duration:"
    if value.startswith(prefix):
        duration_ms = parse_iso_duration_ms(value[len(prefix) :])
        if duration_ms < 0:
            raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
        return "by_duration", duration_ms
    raise ValueError(f"Unknown auto offset reset strategy: {value}")


def _auto_offset_reset(value: Any) -> str | None:
    try:
        parse_share_auto_offset_reset(str(value))
    except ValueError:
        return SHARE_AUTO_OFFSET_RESET_MESSAGE
    return None


GROUP_CONFIGS = (
    ConfigDef()
    .define(
        "consumer.session.timeout.ms",
        "int",
        45000,
        "A consumer group member (KIP-848 protocol) that has not heartbeated for this long is removed.",
        at_least(1),
    )
    .define(
        "consumer.heartbeat.interval.ms",
        "int",
        5000,
        "The heartbeat interval the coordinator gives the members of a consumer group.",
        at_least(1),
    )
    .define(
        "share.session.timeout.ms",
        "int",
        45000,
        "A share group member that has not heartbeated for this long is removed.",
        at_least(1),
    )
    .define(
        "share.heartbeat.interval.ms",
        "int",
        5000,
        "The heartbeat interval the coordinator gives the members of a share group.",
        at_least(1),
    )
    .define(
        "share.record.lock.duration.ms",
        "int",
        30000,
        "How long a record delivered to a share group member stays locked to it.",
        at_least(1000),
    )
    .define(
        "share.auto.offset.reset",
        "string",
        "latest",
        "Where a share group starts reading a partition it has no state for: latest, earliest, or "
        "by_duration:PnDTnHnMn.nS (an ISO-8601 duration, not negative: the first record at most that long ago).",
        _auto_offset_reset,
    )
    .define(
        "share.isolation.level",
        "string",
        "read_uncommitted",
        "read_committed: a share group delivers only committed transactional records; read_uncommitted: "
        "every record, aborted ones too.",
        one_of("read_committed", "read_uncommitted"),
    )
)
"""The keys of a ``GROUP`` config resource (Kafka 4.2's non-streams ``GroupConfig``)."""

GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
}
"""Group key -> the broker key its default comes from (Kafka's ``extractGroupConfigMap``)."""

GROUP_CONFIG_BOUNDS: dict[str, tuple[str, str]] = {
    "consumer.heartbeat.interval.ms": (
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
}
"""Group key -> (min broker key, max broker key), in Kafka's order of checking."""

_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """One group's effective configs: its overrides over the broker's defaults. Field names are
    the keys with ``_`` for ``.``."""

    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_record_lock_duration_ms: int = 30000
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> GroupConfig:
        """From typed values by key (keys left out keep the field defaults above)."""
        return cls(**{k.replace(".", "_"): v for k, v in values.items() if k in GROUP_CONFIGS})

    def values(self) -> dict[str, Any]:
        """The typed values by key."""
        return {f.name.replace("_", "."): getattr(self, f.name) for f in fields(self)}

    @property
    def share_read_committed(self) -> bool:
        return self.share_isolation_level == "read_committed"

    def share_auto_offset_reset_strategy(self) -> tuple[str, int | None]:
        """:func:`parse_share_auto_offset_reset` of ``share.auto.offset.reset``."""
        return parse_share_auto_offset_reset(self.share_auto_offset_reset)


def broker_group_defaults(broker: ConfigSource) -> dict[str, Any]:
    """Every group key's default on this broker: its broker key's value, else the table's default."""
    defaults = {k.name: k.default for k in GROUP_CONFIGS.keys.values()}
    for key, broker_key in GROUP_CONFIG_DEFAULTS.items():
        defaults[key] = int(broker[broker_key])
    return defaults


def check_broker_group_keys(values: Mapping[str, Any]) -> None:
    """The ``group.share.*`` defaults within their bounds (Kafka's ``GroupCoordinatorConfig`` and
    ``ShareGroupConfig`` checks); InvalidConfigError naming the keys otherwise. (The
    ``group.consumer.*`` ones are checked when the coordinator is built.)"""
    for key, (low_key, high_key) in GROUP_CONFIG_BOUNDS.items():
        broker_key = GROUP_CONFIG_DEFAULTS[key]
        if not key.startswith("share."):
            continue
        value, low, high = (int(values[k]) for k in (broker_key, low_key, high_key))
        if value < low:
            raise InvalidConfigError(f"{broker_key} must be greater than or equal to {low_key}")
        if value > high:
            raise InvalidConfigError(f"{broker_key} must be less than or equal to {high_key}")
    if int(values["group.share.heartbeat.interval.ms"]) >= int(values["group.share.session.timeout.ms"]):
        raise InvalidConfigError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")


def validate_group_config(overrides: Mapping[str, str], broker: ConfigSource) -> GroupConfig:
    """Kafka's ``GroupConfigManager.validate``: every key known ("Unknown group config name: k"),
    every value of its type and range, then the whole (the overrides over the broker's defaults)
    within the broker's bounds and each session timeout above its heartbeat interval. Returns the
    group's effective config; raises InvalidConfigError."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    values = broker_group_defaults(broker)
    for name, raw in overrides.items():
        if raw is None:
            raise InvalidConfigError(f"Null value not supported for group configs: {name}")
        values[name] = GROUP_CONFIGS.validate_one(name, raw)
    for key, (low_key, high_key) in GROUP_CONFIG_BOUNDS.items():
        if values[key] < int(broker[low_key]):
            raise InvalidConfigError(f"{key} must be greater than or equal to {low_key}")
        if values[key] > int(broker[high_key]):
            raise InvalidConfigError(f"{key} must be less than or equal to {high_key}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")
    return GroupConfig.from_values(values)


class GroupConfigs:
    """Every group's configs on this broker (Kafka's ``GroupConfigManager``); see the module
    docstring. ``listeners`` are told the group id after its configs changed."""

    def __init__(self, broker: ConfigSource) -> None:
        self._broker = broker
        self.defaults = GroupConfig.from_values(broker_group_defaults(broker))
        """The config of a group without overrides."""
        self._configs: dict[str, GroupConfig] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self.listeners: list[Callable[[str], None]] = []

    def get(self, group_id: str) -> GroupConfig:
        """``group_id``'s effective config (the defaults when it has no overrides)."""
        return self._configs.get(group_id, self.defaults)

    def overrides(self, group_id: str) -> dict[str, str]:
        """The group's stored overrides as last applied here (empty when none)."""
        return dict(self._overrides.get(group_id, {}))

    def validate(self, overrides: Mapping[str, str]) -> GroupConfig:
        """:func:`validate_group_config` against this broker's keys."""
        return validate_group_config(overrides, self._broker)

    def effective(self, overrides: Mapping[str, str], group_id: str = "") -> GroupConfig:
        """A group's config with ``overrides`` as stored: unknown keys and values that do not
        parse are skipped, values outside the broker's bounds capped to them (each logged)."""
        values = broker_group_defaults(self._broker)
        for name, raw in overrides.items():
            if name not in GROUP_CONFIGS:
                log.warning("group %s: ignoring unknown group config %s", group_id, name)
                continue
            try:
                values[name] = GROUP_CONFIGS.validate_one(name, raw)
            except InvalidConfigError as exc:
                log.warning("group %s: ignoring %s", group_id, exc)
                continue
            bounds = GROUP_CONFIG_BOUNDS.get(name)
            if bounds is not None:
                low, high = int(self._broker[bounds[0]]), int(self._broker[bounds[1]])
                capped = min(max(values[name], low), high)
                if capped != values[name]:
                    log.warning(
                        "group %s: %s = %s is outside the broker's bounds [%d, %d]; using %d",
                        group_id,
                        name,
                        raw,
                        low,
                        high,
                        capped,
                    )
                    values[name] = capped
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if values[session] <= values[heartbeat]:
                log.warning("group %s: %s is not greater than %s", group_id, session, heartbeat)
        return GroupConfig.from_values(values)

    def update(self, group_id: str, overrides: Mapping[str, str]) -> GroupConfig:
        """Apply ``group_id``'s stored overrides (all of them; empty removes the group's entry),
        read as :meth:`effective` reads them; the listeners are told. Returns the group's config."""
        config = self.effective(overrides, group_id)
        if overrides:
            self._overrides[group_id] = dict(overrides)
            self._configs[group_id] = config
        else:
            self._overrides.pop(group_id, None)
            self._configs.pop(group_id, None)
        for listener in self.listeners:
            listener(group_id)
        return config

    def process_config_changes(self, entity_name: str, config: dict[str, str]) -> None:
        """The ZkConfigManager handler of ``groups``: ``entity_name`` is the sanitized group id."""
        group_id = desanitize(entity_name)
        if config != self._overrides.get(group_id, {}):
            log.info("group %s: group configs %s", group_id, config)
        self.update(group_id, config)

"""DescribeConfigs (key 32): the configuration of topics and of this broker.

v1..v4 (v4 is the first flexible version). Each resource is answered on its own:

- **topic** (resource type 2): every key of the topic config table (or only ``configuration_keys``
  when that list is non-empty; null or empty means all, unknown keys are left out). The value of a
  key is the topic's override if it has one (``config_source`` 1, DYNAMIC_TOPIC_CONFIG), else the
  broker's value for the key's broker synonym: the source of its first synonym (below), or 5
  (DEFAULT_CONFIG) when it has none. Topic configs are never ``read_only``. An invalid topic name gets
  INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
- **broker** (resource type 4): every broker key; 2 (DYNAMIC_BROKER_CONFIG) when set in
  ``/config/brokers/<id>``, 3 (DYNAMIC_DEFAULT_BROKER_CONFIG) when set in
  ``/config/brokers/<default>``, 4 (STATIC_BROKER_CONFIG) when set in ``server.properties``, 5
  (DEFAULT_CONFIG) otherwise. ``read_only`` is false exactly for the keys Kafka 3.9 can update
  dynamically (``DynamicBrokerConfig.AllDynamicConfigs``: listeners, ``advertised.listeners``,
  the log defaults such as ``log.retention.ms``, ``message.max.bytes``, ``num.io.threads``, ...),
  true for the others (``broker.id``, ``log.dirs``, ``log.retention.hours``, ...); see
  :mod:`odradek.server.dynamic_config` for which of them take effect here.
  The resource name must be this broker's id; the empty name lists the cluster-wide dynamic
  defaults that are set. Any other name gets INVALID_REQUEST.
- **group** (resource type 32, Kafka 4's group configs): every key of the group config table
  (:mod:`odradek.coordinator.group.group_config`), valued by the group's override in
  ``/config/groups/<group>`` (``config_source`` 8, GROUP_CONFIG) or else the broker's default for
  it (5); the one synonym is the key itself with that value and source, as Kafka's
  ``createGroupConfigEntry``. Any group id but the empty one (INVALID_REQUEST), whether the group
  exists or not.
- any other resource type: INVALID_REQUEST.

``include_synonyms`` lists, per key, every place a value comes from, highest priority first, as
Kafka's ``ConfigHelper`` does: the topic override, then, for the key's chain of broker keys
(``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``; ``log.roll.ms``,
``log.roll.hours``; ``log.flush.interval.ms``, ``log.flush.scheduler.interval.ms``; else the key
alone), those set in ``server.properties`` and then those with a default, starting from the first
entry for the key itself (a topic key's first broker synonym): a key never lists higher-priority
keys, and a key with neither a static value nor a default lists none (``log.retention.ms``, and
so ``retention.ms`` without an override, have no synonyms by default; ``log.retention.hours``
lists ``log.retention.hours=168``). ``config_type`` (v3+) uses Kafka's ``ConfigType`` ids;
``documentation`` (v3+) is sent when ``include_documentation``. Password keys are
``is_sensitive`` with a null value.

Values are rendered as Kafka renders them: booleans ``true``/``false``, lists comma-separated,
no value as null. :func:`topic_config_entries` is also used by CreateTopics (v5+ returns the
new topic's configs). Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from odradek.configdef import ConfigDef, ConfigKey
from odradek.coordinator.group.group_config import GROUP_CONFIGS
from odradek.errors import ErrorCode, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from odradek.metadata.config_entities import sanitize
from odradek.metadata.config_znodes import ConfigType
from odradek.protocol.api_keys import ApiKey
from odradek.server.admin_manager import validate_topic_name
from odradek.server.auth_helper import AclOperation, config_refusal
from odradek.server.config import BROKER_CONFIGS
from odradek.server.dynamic_config import DYNAMIC_BROKER_CONFIGS, listener_base
from odradek.server.request import RequestContext
from odradek.storage.config import BROKER_SYNONYMS, TOPIC_CONFIGS

if TYPE_CHECKING:
    from kio.schema.describe_configs.v3 import request as describe_configs_v3

    from odradek.server.apis.request_types import DescribeConfigsRequest
    from odradek.server.apis.request_types_admin import DescribeConfigsResource
    from odradek.server.services import ApiServices

API_KEY = ApiKey.DESCRIBE_CONFIGS
MIN_VERSION = 1
MAX_VERSION = 4

log = logging.getLogger(__name__)

# Kafka's ConfigResource.Type ids.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32

# Kafka's DescribeConfigsResponse.ConfigSource ids.
UNKNOWN_CONFIG = 0
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8

# Kafka's DescribeConfigsResponse.ConfigType ids.
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "password": 9}

# Broker keys that set the same value, highest priority first (Kafka's
# ``DynamicBrokerConfig.brokerConfigSynonyms``); every other key is its own only synonym.
BROKER_SYNONYM_CHAINS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_FLUSH_CHAIN = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that set ``name``'s value, highest priority first (``name`` among them)."""
    if name == _FLUSH_CHAIN[0]:
        return _FLUSH_CHAIN
    for chain in BROKER_SYNONYM_CHAINS:
        if name in chain:
            return chain
    return (name,)


@dataclass(slots=True)
class ConfigEntry:
    """One described config key, independent of the response version."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
    config_type: int = 0
    documentation: str | None = None


def render_value(value: Any) -> str | None:
    """A typed config value as Kafka prints it (``ConfigDef.convertToString``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _static_text(raw: Any, key: ConfigKey | None) -> str | None:
    """A value from ``server.properties`` (a string, or typed when given programmatically)."""
    if isinstance(raw, str):
        return raw
    if key is not None:
        return render_value(key.parse(raw))
    return render_value(raw)


def _broker_synonyms(
    broker: ApiServices, name: str, names: Sequence[str], sensitive: bool, per_broker: bool = True
) -> list[tuple[str, str | None, int]]:
    """Kafka's ``ConfigHelper.configSynonyms``: (key, value, source) for each of ``names`` set in
    ``/config/brokers/<id>`` (unless ``per_broker`` is false: the cluster default resource), then
    in ``/config/brokers/<default>``, then in ``server.properties``, then each with a default,
    with the entries before the first one for ``name`` dropped. So a key that is neither set nor
    defaulted has no synonyms at all, even when a lower-priority key of its chain has a value
    (``log.retention.ms`` is null by default, so its list is empty, and its source is
    DEFAULT_CONFIG), and a key never lists the keys that win over it (``log.retention.hours``
    does not list a static ``log.retention.ms``)."""
    dynamic = broker.dynamic_config
    layers: list[tuple[Mapping[str, Any], int]] = [(dynamic.default, DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if per_broker:
        layers.insert(0, (dynamic.per_broker, DYNAMIC_BROKER_CONFIG))
    layers.append((dynamic.static.originals, STATIC_BROKER_CONFIG))
    out: list[tuple[str, str | None, int]] = []
    for values, source in layers:
        for key_name in names:
            if key_name in values:
                text = _static_text(values[key_name], BROKER_CONFIGS.keys.get(key_name))
                out.append((key_name, None if sensitive else text, source))
    for key_name in names:
        key = BROKER_CONFIGS.keys.get(key_name)
        if key is not None and key.default is not None:
            out.append((key_name, None if sensitive else render_value(key.default), DEFAULT_CONFIG))
    while out and out[0][0] != name:
        out.pop(0)
    return out


def _topic_synonyms(broker: ApiServices, name: str, sensitive: bool) -> list[tuple[str, str | None, int]]:
    """The broker-level synonyms of topic key ``name`` (none for keys without a broker default)."""
    broker_key = BROKER_SYNONYMS.get(name)
    if broker_key is None:
        return []
    return _broker_synonyms(broker, broker_key, broker_config_synonyms(broker_key), sensitive)


def _wanted(keys: Iterable[str], requested: Sequence[str] | None) -> list[str]:
    if not requested:
        return sorted(keys)
    wanted = set(requested)
    return sorted(k for k in keys if k in wanted)


def topic_config_entries(
    broker: ApiServices,
    overrides: Mapping[str, str],
    requested: Sequence[str] | None = None,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """Every (or every requested) topic config of a topic with ``overrides``, sorted by name.

    ``synonyms`` is always filled; callers drop it when the request did not ask for synonyms.
    """
    defaults = broker.config.log_config_defaults()
    entries = []
    for name in _wanted(TOPIC_CONFIGS.keys, requested):
        key = TOPIC_CONFIGS.keys[name]
        sensitive = key.type == "password"
        synonyms = _topic_synonyms(broker, name, sensitive)
        value: str | None
        if name in overrides:
            value = overrides[name]
            synonyms.insert(0, (name, None if sensitive else value, DYNAMIC_TOPIC_CONFIG))
        else:
            value = render_value(defaults.get(name, key.default))
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else value,
                source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                is_sensitive=sensitive,
                read_only=False,
                synonyms=synonyms,
                config_type=CONFIG_TYPES.get(key.type, 0),
                documentation=key.doc if include_documentation else None,
            )
        )
    return entries


def broker_config_entries(
    broker: ApiServices,
    requested: Sequence[str] | None = None,
    include_documentation: bool = False,
    per_broker: bool = True,
) -> list[ConfigEntry]:
    """Every (or every requested) broker config of this broker, sorted by name, valued and
    sourced by the first synonym (the dynamic values first, see :func:`_broker_synonyms`);
    ``per_broker`` false describes the cluster default resource (no per-broker values)."""
    table: ConfigDef = BROKER_CONFIGS
    entries = []
    for name in _wanted(table.keys, requested):
        key = table.keys[name]
        sensitive = key.type == "password"
        synonyms = _broker_synonyms(broker, name, broker_config_synonyms(name), sensitive, per_broker)
        value = None if sensitive else render_value(broker.config.get(name))
        if synonyms and synonyms[0][2] in (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG):
            value = synonyms[0][1]
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                is_sensitive=sensitive,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                synonyms=synonyms,
                config_type=CONFIG_TYPES.get(key.type, 0),
                documentation=key.doc if include_documentation else None,
            )
        )
    if per_broker:
        entries += _listener_entries(broker, requested)
        entries.sort(key=lambda e: e.name)
    return entries


def _listener_entries(broker: ApiServices, requested: Sequence[str] | None) -> list[ConfigEntry]:
    """The ``listener.name.<l>.<key>`` keys set (statically or dynamically), as Kafka lists them:
    synonyms the prefixed key then ``<key>``; sensitive (value null) when ``<key>`` is a password
    or not a known key (Kafka's ``maybeSensitive``); never read-only."""
    entries = []
    for name in _wanted([k for k in broker.config.originals if listener_base(k)], requested):
        base = listener_base(name)
        assert base is not None
        key = BROKER_CONFIGS.keys.get(base)
        sensitive = key is None or key.type == "password"
        synonyms = _broker_synonyms(broker, name, [name, base], sensitive)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else str(broker.config.originals[name]),
                source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                is_sensitive=sensitive,
                read_only=False,
                synonyms=synonyms,
                config_type=CONFIG_TYPES.get(key.type, 0) if key is not None else 0,
                documentation=None,
            )
        )
    return entries


def check_group_name(name: str) -> None:
    """INVALID_REQUEST for the empty group id (Kafka allows no default group resource)."""
    if not name:
        raise InvalidRequestError("Group name must not be empty")


async def group_overrides(broker: ApiServices, name: str) -> dict[str, str]:
    """The group's stored overrides (``/config/groups/<sanitized name>``)."""
    return await broker.zk.get_entity_configs(ConfigType.GROUP, sanitize(name))


def group_config_entries(
    broker: ApiServices,
    overrides: Mapping[str, str],
    requested: Sequence[str] | None = None,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """Every (or every requested) group config of a group with ``overrides``, sorted by name."""
    values = broker.group_configs.effective(overrides).values()
    entries = []
    for name in _wanted(GROUP_CONFIGS.keys, requested):
        key = GROUP_CONFIGS.keys[name]
        value = render_value(values[name])
        source = GROUP_CONFIG if name in overrides else DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                synonyms=[(name, value, source)],
                config_type=CONFIG_TYPES.get(key.type, 0),
                documentation=key.doc if include_documentation else None,
            )
        )
    return entries


async def topic_exists(broker: ApiServices, name: str) -> bool:
    """Whether ``name`` is a topic: in this broker's metadata cache or in the metadata store."""
    if broker.metadata_cache.topic(name) is not None:
        return True
    return name in await broker.zk.get_all_topics()


async def _describe(
    ctx: RequestContext[DescribeConfigsRequest], resource: DescribeConfigsResource
) -> list[ConfigEntry]:
    broker = ctx.services
    requested = resource.configuration_keys
    req = ctx.request
    # v3+ carry include_documentation (read by version number: only the version a client uses is imported)
    include_doc = ctx.api_version >= 3 and cast("describe_configs_v3.DescribeConfigsRequest", req).include_documentation
    if resource.resource_type == RESOURCE_TOPIC:
        name = resource.resource_name
        validate_topic_name(name)
        if not await topic_exists(broker, name):
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        overrides = await broker.admin.topic_overrides(name)
        return topic_config_entries(broker, overrides, requested, include_doc)
    if resource.resource_type == RESOURCE_BROKER:
        name = resource.resource_name
        if name == "":  # the cluster-wide dynamic defaults only
            default = broker.dynamic_config.default
            if not default:
                return []
            entries = broker_config_entries(broker, sorted(default), include_doc, per_broker=False)
            return [e for e in entries if not requested or e.name in requested]
        if name != str(broker.broker_id):
            raise InvalidRequestError(
                f"Unexpected broker id, expected {broker.broker_id} or empty string, but received {name}"
            )
        return broker_config_entries(broker, requested, include_doc)
    if resource.resource_type == RESOURCE_GROUP:
        check_group_name(resource.resource_name)
        overrides = await group_overrides(broker, resource.resource_name)
        return group_config_entries(broker, overrides, requested, include_doc)
    raise InvalidRequestError(f"Unsupported resource type: {resource.resource_type}")


def _entry(ctx: RequestContext, entry: ConfigEntry, include_synonyms: bool) -> Any:
    synonyms = (
        tuple(ctx.make("DescribeConfigsSynonym", name=n, value=v, source=s) for n, v, s in entry.synonyms)
        if include_synonyms
        else ()
    )
    return ctx.make(
        "DescribeConfigsResourceResult",
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=entry.is_sensitive,
        synonyms=synonyms,
        config_type=entry.config_type,
        documentation=entry.documentation,
    )


async def handle(ctx: RequestContext[DescribeConfigsRequest]) -> Any:
    include_synonyms = bool(ctx.request.include_synonyms)
    results = []
    for resource in ctx.request.resources:
        error, message = ErrorCode.none, None
        configs: tuple[Any, ...] = ()
        refusal = config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        try:
            if refusal is not None:
                error = refusal
            else:
                entries = await _describe(ctx, resource)
                configs = tuple(_entry(ctx, e, include_synonyms) for e in entries)
        except KafkaError as exc:
            error, message = exc.error_code, str(exc) or None
        except Exception as exc:
            log.exception("DescribeConfigs of %s failed", resource.resource_name)
            error, message = ErrorCode.unknown_server_error, f"unexpected error: {exc}"
        results.append(
            ctx.make(
                "DescribeConfigsResult",
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), results=tuple(results))

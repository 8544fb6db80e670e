"""Dynamic broker configs (Kafka 3.9's ``DynamicBrokerConfig`` in ZooKeeper mode).

AlterConfigs and IncrementalAlterConfigs on a broker resource (type 4) store keys at
``/config/brokers/<id>`` (resource name ``"<id>"``) or ``/config/brokers/<default>`` (name ``""``),
each write followed by a ``/config/changes/config_change_<seq>`` notice that every broker's
:class:`~odradek.metadata.config_entities.ZkConfigManager` hands to
:meth:`DynamicBrokerConfig.process_config_changes`. The effective config is ``server.properties``,
overridden by the cluster default, overridden by the broker's own entity; it is rebuilt as a new
:class:`~odradek.server.config.KafkaConfig` and each registered *reconfigurable* whose keys changed
is called with ``(old, new)`` (:meth:`DynamicBrokerConfig.add_reconfigurable`).

Validation, in Kafka's order, each failure an InvalidConfigError whose text the APIs prefix with
``Invalid config value for resource ConfigResource(type=BROKER, name='0'): ``:

- a broker key that is not dynamic: ``Cannot update these configs dynamically: Set(log.dirs)``;
  keys Kafka does not know (and ``listener.name.<l>.<key>``) pass this check, as in Kafka;
- an SSL store key without a listener prefix: ``These security configs can be dynamically updated
  only per-listener using the listener prefix: Set(ssl.keystore.location)``;
- a value of the wrong type or range (the key's own message);
- on the cluster default, a per-broker key (listeners, SSL stores, ``listener.name.*`` except the
  cluster-level listener keys): ``Cannot update these configs at default cluster level, broker id
  must be specified: Set(listeners)``;
- the whole resulting config must still load (``KafkaConfig``), and every listener whose resolved
  keys change must still build: ``Validation of dynamic config update of SSLFactory failed:
  <the key store problem>`` (Kafka's ``SslFactory.validateReconfiguration``).

A change of a listener's keys (``listener.name.<l>.ssl.*``, ``...sasl.*``, ...) builds a new
:class:`~odradek.server.listener_security.ListenerSecurity` (SSL context, SASL users) for the
listener's new connections; open connections keep theirs (Kafka's ``SslFactory.reconfigure``).

Password keys (a dynamic key of type password, or a name ending in one, such as
``listener.name.sasl_ssl.plain.sasl.jaas.config``) are stored encrypted with
``password.encoder.secret`` (:mod:`odradek.security.password_encoder`); without the secret a write
fails with ``Password encoder secret not configured``, on the default entity with ``Password config
can be defined only at broker level``. A stored password that cannot be decoded (with the secret or
``password.encoder.old.secret``) is left out of the effective config with an error in the log.

:data:`DYNAMIC_EFFECTS` says for each key whether it takes effect at once here or is accepted
without effect (``docs/configuration.md`` prints it). Runs on the broker's event loop.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from odradek.errors import InvalidConfigError, InvalidRequestError
from odradek.security.listener_config import LISTENER_PREFIX
from odradek.server.config import BROKER_CONFIGS, KafkaConfig
from odradek.server.connection_quotas import CONNECTION_CONFIGS
from odradek.server.reconfigurable import (
    BrokerConfigHolder,
    BrokerReconfigurable,
    DynamicControllerConfig,
    DynamicListenerConfig,
    DynamicLogConfig,
    ReconfigureWith,
    changed_keys,
)
from odradek.storage.config import BROKER_SYNONYMS

if TYPE_CHECKING:
    from odradek.security.password_encoder import PasswordEncoder
    from odradek.server.broker import Broker
    from odradek.server.listener_security import ListenerSecurity

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"

# SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix, and only per broker.
DYNAMIC_SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
LISTENER_CONFIGS = frozenset({"advertised.listeners", "listeners", "listener.security.protocol.map"})
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS
LOG_CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
"""``LogCleaner.ReconfigurableConfigs`` (with ``message.max.bytes``, applied to the logs here)."""
LOG_CONFIGS = frozenset(
    {k for t, k in BROKER_SYNONYMS.items() if t != "message.format.version"}
    | {"log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours"}
)
"""The broker defaults of topic configs (``DynamicLogConfig``): applied to every log without an override."""
THROTTLE_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate"})
ACCEPTED_WITHOUT_EFFECT = frozenset(
    {
        # DynamicThreadPool.ReconfigurableConfigs: the loop serves requests; pools are not resized.
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "metric.reporters",
        "num.network.threads",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
    }
    | LISTENER_CONFIGS
)

DYNAMIC_BROKER_CONFIGS: frozenset[str] = (
    LOG_CONFIGS - {"log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours"}
) | (CONNECTION_CONFIGS | THROTTLE_CONFIGS | LOG_CLEANER_CONFIGS | ACCEPTED_WITHOUT_EFFECT | DYNAMIC_SECURITY_CONFIGS)
"""Kafka 3.9's ``DynamicBrokerConfig.AllDynamicConfigs`` plus the replication throttle rates
(``DynamicConfig.Broker``): described with ``read_only`` false; every other known key is read-only.
(``log.retention.hours`` and the other lower synonyms are not dynamic in Kafka either.)"""

TAKES_EFFECT = "takes effect at once"
NO_EFFECT = "accepted without effect"
NEW_CONNECTIONS = "takes effect for the listener's new connections (open ones keep theirs)"
DYNAMIC_EFFECTS: dict[str, str] = {
    key: (
        NO_EFFECT
        if key in ACCEPTED_WITHOUT_EFFECT
        else NEW_CONNECTIONS
        if key in DYNAMIC_SECURITY_CONFIGS
        else TAKES_EFFECT
    )
    for key in sorted(DYNAMIC_BROKER_CONFIGS)
}

_MECHANISM_SUFFIXES = ("sasl.jaas.config",)


def dynamic_config_table() -> str:
    """The Markdown table of ``docs/configuration.md``: key, where it may be set, its effect."""
    rows = ["| key | set on | effect here |", "| --- | --- | --- |"]
    for key, effect in DYNAMIC_EFFECTS.items():
        if key in LOG_CLEANER_CONFIGS:
            effect = f"{effect} (the log cleaner restarts its tasks and workers)"
        if key in DYNAMIC_SECURITY_CONFIGS:
            scope = "one broker, `listener.name.<listener>.` prefix only"
        elif key in PER_BROKER_CONFIGS:
            scope = "one broker"
        else:
            scope = "one broker or `<default>`"
        rows.append(f"| `{key}` | {scope} | {effect} |")
    rows.append(
        "| `listener.name.<listener>.<key>` (`ssl.*`, `sasl.*`, `<mechanism>.sasl.jaas.config`, ...) | one broker | "
        f"{NEW_CONNECTIONS}; validated (key stores loaded) before stored |"
    )
    rows.append("| any other broker key | | refused: `Cannot update these configs dynamically: Set(<key>)` |")
    return "\n".join(rows)


def is_password_config(name: str) -> bool:
    """Kafka's ``isPasswordConfig``: the name ends with a dynamic password key."""
    return name.endswith(_PASSWORD_CONFIGS)


_PASSWORD_CONFIGS: tuple[str, ...] = (
    tuple(
        sorted(
            k for k in DYNAMIC_BROKER_CONFIGS if k in BROKER_CONFIGS.keys and BROKER_CONFIGS.keys[k].type == "password"
        )
    )
    + _MECHANISM_SUFFIXES
)


def scala_set(names: Iterable[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def listener_base(name: str) -> str | None:
    """``<key>`` of ``listener.name.<listener>.<key>``, else None."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    _, sep, base = name[len(LISTENER_PREFIX) :].partition(".")
    return base if sep else None


def validate_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs`` (the module docstring's order)."""
    fixed = [k for k in props if k in BROKER_CONFIGS.keys and k not in DYNAMIC_BROKER_CONFIGS]
    if fixed:
        raise InvalidConfigError(f"Cannot update these configs dynamically: {scala_set(fixed)}")
    unprefixed = [k for k in props if k in DYNAMIC_SECURITY_CONFIGS]
    if unprefixed:
        raise InvalidConfigError(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            f"{scala_set(unprefixed)}"
        )
    for key, value in props.items():
        if key in BROKER_CONFIGS.keys:
            BROKER_CONFIGS.validate_one(key, value)
    if not per_broker:
        bases = {k: listener_base(k) for k in props}
        per = [
            k for k, b in bases.items() if k in PER_BROKER_CONFIGS or (b and b not in CLUSTER_LEVEL_LISTENER_CONFIGS)
        ]
        if per:
            raise InvalidConfigError(
                f"Cannot update these configs at default cluster level, broker id must be specified: {scala_set(per)}"
            )


def password_encoders(config: KafkaConfig) -> tuple[PasswordEncoder | None, PasswordEncoder | None]:
    """(encoder with ``password.encoder.secret``, decoder with ``password.encoder.old.secret``).

    The encoders use ``cryptography``, imported here only when a secret is set."""
    if not config.get("password.encoder.secret") and not config.get("password.encoder.old.secret"):
        return None, None
    from odradek.security.password_encoder import PasswordEncoder

    out: list[PasswordEncoder | None] = []
    for key in ("password.encoder.secret", "password.encoder.old.secret"):
        secret = config.get(key)
        out.append(
            None
            if not secret
            else PasswordEncoder(
                str(secret),
                config.get("password.encoder.keyfactory.algorithm"),
                str(config.get("password.encoder.cipher.algorithm")),
                int(config.get("password.encoder.key.length")),
                int(config.get("password.encoder.iterations")),
            )
        )
    return out[0], out[1]


class DynamicBrokerConfig:
    """One broker's dynamic config state; see the module docstring. ``current`` is the effective
    :class:`KafkaConfig` (``static`` until a dynamic key is set)."""

    def __init__(self, static: KafkaConfig) -> None:
        self.static = static
        self.current = static
        self.broker_id = static.broker_id
        self.default: dict[str, str] = {}
        """``/config/brokers/<default>``, passwords decoded."""
        self.per_broker: dict[str, str] = {}
        """``/config/brokers/<id>`` of this broker, passwords decoded."""
        self.encoder, self.old_encoder = password_encoders(static)
        self.listeners: DynamicListenerConfig | None = None
        """The listeners' reconfigurable (the broker registers it): what an AlterConfigs of this
        broker also asks about key store files changed in place."""
        self._reconfigurables: list[BrokerReconfigurable] = []

    def add_reconfigurable(self, reconfigurable: BrokerReconfigurable) -> None:
        """Validate with and apply to ``reconfigurable`` every change of one of its
        ``reconfigurable_configs`` (:mod:`odradek.server.reconfigurable`); in registration order."""
        self._reconfigurables.append(reconfigurable)

    def _affected(self, old: KafkaConfig, new: KafkaConfig) -> list[BrokerReconfigurable]:
        changed = changed_keys(old, new)
        return [r for r in self._reconfigurables if any(k in r.reconfigurable_configs for k in changed)]

    # --- stored form -------------------------------------------------------------------------

    def to_persistent(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """``props`` with every password encrypted (Kafka's ``toPersistentProps``)."""
        out = dict(props)
        for name, value in props.items():
            if is_password_config(name) and value is not None:
                if not per_broker:
                    raise InvalidConfigError("Password config can be defined only at broker level")
                if self.encoder is None:
                    raise InvalidConfigError("Password encoder secret not configured")
                out[name] = self.encoder.encode(value)
        return out

    def from_persistent(self, stored: Mapping[str, str]) -> dict[str, str]:
        """``stored`` with passwords decrypted; undecodable ones left out (logged)."""
        out = dict(stored)
        for name, value in stored.items():
            if not is_password_config(name):
                continue
            out.pop(name)
            for encoder in (self.encoder, self.old_encoder):
                if encoder is None:
                    continue
                try:
                    out[name] = encoder.decode(value)
                    break
                except InvalidConfigError:
                    continue
            else:
                log.error("broker %d: dynamic config %s could not be decoded: left out", self.broker_id, name)
        return out

    # --- effective config ----------------------------------------------------------------------

    def _props(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> dict[str, object]:
        props: dict[str, object] = dict(self.static.originals)
        for layer in (default, per_broker):
            props.update({k: v for k, v in layer.items() if k in BROKER_CONFIGS.keys or listener_base(k)})
        return props

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Check ``props`` as the new content of this broker's (or the default) entity: the keys
        themselves (:func:`validate_configs`), the whole resulting config (it must load as a
        :class:`KafkaConfig`), then every reconfigurable whose keys it changes
        (``validate_reconfiguration``; e.g. a listener whose key store no longer loads: ``Validation
        of dynamic config update of SSLFactory failed: ...``), before anything is applied."""
        validate_configs(props, per_broker)
        layers = (self.default, props) if per_broker else (props, self.per_broker)
        new = KafkaConfig(self._props(*layers))
        for reconfigurable in self._affected(self.current, new):
            reconfigurable.validate_reconfiguration(new)

    async def process_config_changes(self, entity: str, stored: dict[str, str]) -> None:
        """The ZkConfigManager handler of ``brokers``: ``entity`` is ``<default>`` or a broker id."""
        if entity == DEFAULT_ENTITY:
            self.default = self.from_persistent(stored)
        elif entity == str(self.broker_id):
            self.per_broker = self.from_persistent(stored)
        else:
            return
        await self.reload()

    async def reload(self) -> None:
        """Rebuild :attr:`current` and call the reconfigurables of the keys that changed."""
        try:
            new = KafkaConfig(self._props(self.default, self.per_broker))
        except InvalidConfigError as exc:
            log.error("broker %d: dynamic configs not applied: %s", self.broker_id, exc)
            return
        old, self.current = self.current, new
        changed = changed_keys(old, new)
        if not changed:
            return
        log.info("broker %d: dynamic configs changed: %s", self.broker_id, ", ".join(sorted(changed)))
        for reconfigurable in self._affected(old, new):
            result = reconfigurable.reconfigure(old, new)
            if inspect.isawaitable(result):
                await result


def broker_entity(name: str) -> str:
    """The ``/config/brokers`` child of a broker resource name; InvalidRequestError if malformed."""
    if name == "":
        return DEFAULT_ENTITY
    if not name.isdigit():
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}")
    return name


async def broker_overrides(broker: Broker, name: str) -> dict[str, str]:
    """The stored keys of a broker resource, passwords decrypted (IncrementalAlterConfigs' base)."""
    stored = await broker.zk.get_entity_configs("brokers", broker_entity(name))
    return broker.dynamic_config.from_persistent(stored)


async def set_broker_overrides(broker: Broker, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Validate and (unless ``validate_only``) store the complete dynamic keys of ``name``, then
    apply them on this broker before returning (the others follow the change notice). A broker id
    other than this broker's is refused with INVALID_REQUEST, as Kafka (clients send a broker
    resource to the broker it names)."""
    entity = broker_entity(name)
    per_broker = entity != DEFAULT_ENTITY
    if per_broker and int(entity) != broker.broker_id:  # Kafka's ZkAdminManager.getBrokerId
        raise InvalidRequestError(f"Unexpected broker id, expected {broker.broker_id}, but received {name}")
    dynamic = broker.dynamic_config
    try:
        dynamic.validate(overrides, per_broker)
        if validate_only:
            return
        reloaded = dynamic.listeners.updated_stores(broker.config) if per_broker and dynamic.listeners else {}
        stored = dynamic.to_persistent(overrides, per_broker)
    except InvalidConfigError as exc:
        raise InvalidConfigError(
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {exc}"
        ) from None
    await broker.zk.set_entity_configs("brokers", entity, stored)
    await dynamic.process_config_changes(entity, stored)
    for security in reloaded.values():
        current = broker.listener_securities.get(security.listener_name)
        if current is not None and current.stores_modified():  # not rebuilt by the change itself
            use_listener_security(broker, security)


def use_listener_security(broker: Broker, security: ListenerSecurity) -> None:
    """Serve the listener's new connections with ``security`` (open ones keep theirs)."""
    broker.listener_securities[security.listener_name] = security
    broker.socket_server.update_security(security)
    log.info("broker %d: listener %s reconfigured for new connections", broker.broker_id, security.listener_name)


def register_broker_reconfigurables(broker: Broker) -> None:
    """The broker's components that reconfigure themselves, in the order they are applied: the
    broker's own config (first, so the others read the new one through the broker too), the
    listeners' security, the log defaults, the connection quotas, the replication throttle rates,
    the controller's unclean election default and the log cleaner (its keys are
    :data:`LOG_CLEANER_CONFIGS`, Kafka's ``LogCleaner.ReconfigurableConfigs`` with
    ``message.max.bytes``: the cleaner restarts with them).

    Each is called only when one of its keys changed, on the event loop, also at start-up when
    ``/config/brokers`` holds values (registered before the ZkConfigManager starts).
    """
    dynamic = broker.dynamic_config

    def use_config(new: KafkaConfig) -> None:
        broker.config = new

    dynamic.listeners = DynamicListenerConfig(
        lambda: dynamic.current,
        lambda: broker.listener_securities,
        lambda: broker.credential_cache,
        lambda security: use_listener_security(broker, security),
    )
    dynamic.add_reconfigurable(BrokerConfigHolder(use_config))
    dynamic.add_reconfigurable(dynamic.listeners)
    dynamic.add_reconfigurable(
        DynamicLogConfig(LOG_CONFIGS, lambda: broker.log_manager, lambda: broker.replica_manager)
    )
    dynamic.add_reconfigurable(broker.socket_server.quotas)
    dynamic.add_reconfigurable(ReconfigureWith(THROTTLE_CONFIGS, lambda _old, _new: broker.reload_broker_throttles()))
    dynamic.add_reconfigurable(DynamicControllerConfig(lambda: broker.controller))
    dynamic.add_reconfigurable(ReconfigureWith(LOG_CLEANER_CONFIGS, broker.reconfigure_log_cleaner))

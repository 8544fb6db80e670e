"""Components that reconfigure themselves on a dynamic broker config change (Kafka's
``BrokerReconfigurable``).

:class:`~odradek.server.dynamic_config.DynamicBrokerConfig` computes the effective configuration
(``server.properties`` < ``/config/brokers/<default>`` < ``/config/brokers/<id>``) and nothing
else; what a change means is each component's business, through three members:

- ``reconfigurable_configs``: the keys it reacts to (any container: a frozenset, or
  :class:`MatchingKeys` for key families such as ``listener.name.<l>.*``);
- ``validate_reconfiguration(new)``: raise :class:`~odradek.errors.InvalidConfigError` (Kafka's
  message) if ``new`` cannot be applied; called for every component whose keys change, before any
  is applied and before the change is stored, so an AlterConfigs is refused whole;
- ``reconfigure(old, new)``: apply it (may be a coroutine), in registration order.

Each adapter here reads its settings from the :class:`KafkaConfig` into a typed value and hands it
to its component through one method of the component's own (Kafka's ``DynamicLogConfig``,
``DynamicListenerConfig``, ``DynamicConnectionQuota`` and friends); none assigns another
component's fields. :class:`~odradek.server.connection_quotas.ConnectionQuotas` implements the
protocol itself. Event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from odradek.errors import InvalidConfigError
from odradek.security.listener_config import LISTENER_PREFIX
from odradek.server.config import TLS_PROTOCOLS, KafkaConfig

if TYPE_CHECKING:
    from odradek.controller.controller import KafkaController
    from odradek.metadata.scram_credentials import CredentialCache
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.server.listener_security import ListenerSecurity
    from odradek.storage import LogManager

__all__ = [
    "BrokerConfigHolder",
    "BrokerReconfigurable",
    "DynamicControllerConfig",
    "DynamicListenerConfig",
    "DynamicLogConfig",
    "MatchingKeys",
    "ReconfigureWith",
    "changed_keys",
    "changed_listeners",
]

log = logging.getLogger(__name__)


class BrokerReconfigurable(Protocol):
    """See the module docstring."""

    @property
    def reconfigurable_configs(self) -> Container[str]: ...

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None: ...

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> Awaitable[None] | None: ...


class MatchingKeys:
    """The keys a predicate accepts, as a container (``key in keys``)."""

    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[str], bool]) -> None:
        self._predicate = predicate

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._predicate(key)


ALL_KEYS = MatchingKeys(lambda _key: True)


def changed_keys(old: KafkaConfig, new: KafkaConfig) -> set[str]:
    """The keys whose effective value differs between ``old`` and ``new`` (defined keys by value,
    others, such as listener-prefixed ones, by their raw value)."""
    changed = {k for k in set(old.values) | set(new.values) if old.values.get(k) != new.values.get(k)}
    changed |= {
        k
        for k in set(old.originals) | set(new.originals)
        if k not in new.values and old.originals.get(k) != new.originals.get(k)
    }
    return changed


class ReconfigureWith:
    """A component whose reconfiguration is one call of its own, with no validation beyond what
    building the :class:`KafkaConfig` already checked (the replication throttles, the log
    cleaner)."""

    def __init__(
        self, keys: Iterable[str] | Container[str], apply: Callable[[KafkaConfig, KafkaConfig], Awaitable[None] | None]
    ) -> None:
        self.reconfigurable_configs: Container[str] = keys if isinstance(keys, Container) else frozenset(keys)
        self._apply = apply

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        """Nothing beyond the config's own checks."""

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> Awaitable[None] | None:
        return self._apply(old_config, new_config)


class BrokerConfigHolder:
    """The broker's own ``config``: every key; replaced first, so the components called after it
    read the new configuration through the broker too."""

    reconfigurable_configs = ALL_KEYS

    def __init__(self, use: Callable[[KafkaConfig], None]) -> None:
        self._use = use

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        """Building ``new_config`` checked every key."""

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> None:
        self._use(new_config)


class DynamicLogConfig:
    """The log defaults (``log.*`` broker keys, Kafka's ``DynamicLogConfig``): new logs take the new
    :class:`~odradek.storage.config.LogConfig`, and every hosted topic's logs are rebuilt from it
    under their topic overrides."""

    def __init__(
        self,
        keys: Iterable[str],
        log_manager: Callable[[], LogManager | None],
        replica_manager: Callable[[], ReplicaManager],
    ) -> None:
        self.reconfigurable_configs = frozenset(keys)
        self._log_manager = log_manager
        self._replica_manager = replica_manager

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        new_config.default_log_config()  # raises InvalidConfigError for a default no log accepts

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> None:
        log_manager = self._log_manager()
        if log_manager is not None:
            log_manager.reconfigure_default_config(new_config.default_log_config())
        replica_manager = self._replica_manager()
        for topic in {tp.topic for tp in replica_manager.partitions}:
            replica_manager.update_log_config(topic)


class DynamicControllerConfig:
    """``unclean.leader.election.enable``: the controller's default for topics without an override."""

    reconfigurable_configs = frozenset({"unclean.leader.election.enable"})

    def __init__(self, controller: Callable[[], KafkaController | None]) -> None:
        self._controller = controller

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        """A boolean, checked when the config was built."""

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> None:
        controller = self._controller()
        if controller is not None:
            controller.set_unclean_leader_election_default(new_config.get_bool("unclean.leader.election.enable"))


_LISTENER_SECURITY_KEYS = frozenset(
    {"connections.max.reauth.ms", "connection.failed.authentication.delay.ms", "listener.security.protocol.map"}
)


def _is_security_key(key: str) -> bool:
    return key.startswith(("ssl.", "sasl.")) or key.endswith(".sasl.jaas.config") or key in _LISTENER_SECURITY_KEYS


def _security_view(config: KafkaConfig, listener: str) -> dict[str, object]:
    """What a listener's security is built from: its resolved ``ssl.*``, ``sasl.*`` and
    ``<mechanism>.sasl.jaas.config`` keys and the authentication timing keys."""
    return {
        k: v
        for k, v in config.for_listener(listener).items()
        if not k.startswith(LISTENER_PREFIX) and _is_security_key(k)
    }


def _allowed_changes(config: KafkaConfig, listener: str) -> tuple[bool, bool]:
    """The listener's ``ssl.allow.dn.changes`` and ``ssl.allow.san.changes``."""
    return (
        bool(config.listener_value(listener, "ssl.allow.dn.changes")),
        bool(config.listener_value(listener, "ssl.allow.san.changes")),
    )


def changed_listeners(old: KafkaConfig, new: KafkaConfig) -> list[str]:
    """The listeners of ``new`` whose security keys (``listener.name.<l>.*`` over the plain ones)
    differ from ``old``'s: those whose security is rebuilt."""
    return [e.listener for e in new.listeners if _security_view(old, e.listener) != _security_view(new, e.listener)]


class DynamicListenerConfig:
    """Every listener's security keys (``listener.name.<l>.ssl.*``, ``...sasl.*``, the cluster-level
    listener keys): a listener whose resolved keys change gets a new
    :class:`~odradek.server.listener_security.ListenerSecurity` for its new connections (Kafka's
    ``SslFactory.reconfigure``); open connections keep theirs.

    Validation builds each changed listener's security from the new config (its key and trust stores
    must load) and, for one already serving, refuses a key store whose certificate changes its
    distinguished name or drops a subject alternative name unless ``ssl.allow.dn.changes`` /
    ``ssl.allow.san.changes`` is set: ``Validation of dynamic config update of SSLFactory failed:
    ...`` (``... of ChannelBuilder ...`` for a SASL listener without TLS), as Kafka.
    """

    reconfigurable_configs = MatchingKeys(lambda k: k.startswith(LISTENER_PREFIX) or _is_security_key(k))

    def __init__(
        self,
        config: Callable[[], KafkaConfig],
        securities: Callable[[], Mapping[str, ListenerSecurity]],
        credential_cache: Callable[[], CredentialCache | None] = lambda: None,
        use: Callable[[ListenerSecurity], None] = lambda _security: None,
    ) -> None:
        """``config``: the configuration in use; ``securities``: the listeners' securities in use
        (what a new key store is compared with); ``use``: serve a listener's new connections with a
        new security."""
        self._config = config
        self._securities = securities
        self._credentials = credential_cache
        self._use = use

    def validate_reconfiguration(self, new_config: KafkaConfig) -> None:
        from odradek.server.listener_security import ensure_compatible, listener_security

        current = self._securities()
        for name in changed_listeners(self._config(), new_config):
            try:
                security = listener_security(new_config, name, None)
                if name in current:
                    ensure_compatible(current[name], security, *_allowed_changes(new_config, name))
            except InvalidConfigError as exc:
                protocol = new_config.listener_security_protocol(name)
                what = "SSLFactory" if protocol in TLS_PROTOCOLS else "ChannelBuilder"
                raise InvalidConfigError(f"Validation of dynamic config update of {what} failed: {exc}") from None

    def reconfigure(self, old_config: KafkaConfig, new_config: KafkaConfig) -> None:
        from odradek.server.listener_security import listener_security

        for name in changed_listeners(old_config, new_config):
            if name not in self._securities():  # not bound yet: start-up builds it from the new config
                continue
            try:
                security = listener_security(new_config, name, self._credentials())
            except InvalidConfigError as exc:  # validated before stored; a file changed since
                log.error("listener %s keeps its security: %s", name, exc)
                continue
            self._use(security)

    def updated_stores(self, config: KafkaConfig) -> dict[str, ListenerSecurity]:
        """Kafka's ``reloadUpdatedFilesWithoutConfigChange``: the TLS listeners whose key or trust
        store file changed in place since it was read, rebuilt from ``config`` (an AlterConfigs of
        this broker applies them, even one that changes nothing else). A store that no longer loads,
        or whose certificate changed as :meth:`validate_reconfiguration` refuses, refuses the request."""
        from odradek.server.listener_security import ensure_compatible, listener_security

        out = {}
        for name, security in self._securities().items():
            if security.stores_modified():
                try:
                    out[name] = listener_security(config, name, self._credentials())
                    ensure_compatible(security, out[name], *_allowed_changes(config, name))
                except InvalidConfigError as exc:
                    raise InvalidConfigError(
                        f"Validation of dynamic config update of SSLFactory failed: {exc}"
                    ) from None
        return out

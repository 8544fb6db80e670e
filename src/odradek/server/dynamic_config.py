"""Dynamic broker configs: the keys AlterConfigs and IncrementalAlterConfigs may change on a broker
resource (type 4), stored as Kafka stores them.

Resource name ``"<id>"`` is one broker (``/config/brokers/<id>``), ``""`` the cluster default
(``/config/brokers/<default>``); each write is followed by a ``/config/changes`` notification that
every broker reads (:meth:`odradek.server.broker.Broker.reload_broker_throttles`). A broker's own
value beats the cluster default, which beats ``server.properties``. Only the replication
throttle rates are dynamic here (Kafka has more): any other key is INVALID_REQUEST ("Cannot update
these configs dynamically"), a value that is not a non-negative long INVALID_CONFIG. Runs on the
broker's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.errors import InvalidConfigError, InvalidRequestError

if TYPE_CHECKING:
    from odradek.server.broker import Broker

DYNAMIC_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate"})
DEFAULT_ENTITY = "<default>"


def broker_entity(name: str) -> str:
    """The ``/config/brokers`` child of a broker resource name; InvalidRequestError if malformed."""
    if name == "":
        return DEFAULT_ENTITY
    if not name.isdigit():
        raise InvalidRequestError(f"Invalid broker id {name!r}: a broker resource is named by its id, or '' for all")
    return name


async def broker_overrides(broker: Broker, name: str) -> dict[str, str]:
    return await broker.zk.get_entity_configs("brokers", broker_entity(name))


async def set_broker_overrides(broker: Broker, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Validate and (unless ``validate_only``) store the complete dynamic overrides of ``name``."""
    entity = broker_entity(name)
    fixed = sorted(k for k in overrides if k not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    for key, value in overrides.items():
        try:
            if int(value) < 0:
                raise ValueError(value)
        except (TypeError, ValueError):
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: not a non-negative long"
            ) from None
    if validate_only:
        return
    await broker.zk.set_entity_configs("brokers", entity, dict(overrides))
    await broker.reload_broker_throttles()

"""``odradek configs --bootstrap-server --entity-type users|clients``: client quotas through
DescribeClientQuotas and AlterClientQuotas, as Kafka 3.9's ``ConfigCommand``.

``--entity-type users --entity-name alice`` (``--entity-default`` for ``<default>``), ``clients``
likewise, or both types together for a (user, client id) quota. ``--alter`` sends the quota keys
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``, ...) in one
AlterClientQuotas entry, ``--delete-config`` keys as removals; SCRAM keys of a user go to
AlterUserScramCredentials (:mod:`odradek.cli.configs_users`). Prints ``Completed updating config
for user alice.`` (``... default config for users in the cluster.``). ``--describe`` asks with
``containsOnly`` filter components (a named entity EXACT, ``--entity-default`` DEFAULT, no name:
every entity of the type) and prints ``Quota configs for user-principal 'alice', client-id 'app'
are producer_byte_rate=1024.0`` per entity (``the default user-principal`` for a default part;
values as Java prints a double).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odradek.cli.common import CommandError
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.sasl.scram import MECHANISMS

__all__ = ["alter_quotas_with_admin", "describe_quotas_with_admin", "java_double"]

_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def java_double(value: float) -> str:
    """Java's ``Double.toString``: ``1024.0``, ``12.5``, ``1.0E7`` (scientific from 10^7 and below 10^-3)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    mantissa, _, exponent = f"{value:.16E}".partition("E")
    digits = mantissa.rstrip("0")
    if digits.endswith("."):
        digits += "0"
    return f"{digits}E{int(exponent)}"


def _check(error_code: int, message: str | None) -> None:
    if error_code != ErrorCode.none:
        raise CommandError(message or ErrorCode(error_code).name.upper())


async def alter_quotas_with_admin(
    bootstrap: str, types: Sequence[str], names: Sequence[str], added: Mapping[str, str], deleted: Sequence[str]
) -> None:
    """One AlterClientQuotas entry for the entity ``types``/``names`` (``""``: the default)."""
    values = {}
    for key, text in added.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise CommandError(f"Cannot parse quota configuration value for {key}: {text}") from None
    async with AdminClient(bootstrap) as admin:
        conn = await admin.cluster.any_connection()
        rb = conn.builder(ApiKey.ALTER_CLIENT_QUOTAS)
        entity = tuple(
            rb.make("EntityData", entity_type=_TYPES[t], entity_name=n or None)
            for t, n in zip(types, names, strict=False)
        )
        ops = tuple(rb.make("OpData", key=k, value=v, remove=False) for k, v in values.items()) + tuple(
            rb.make("OpData", key=k, value=0.0, remove=True) for k in deleted
        )
        response = await conn.send(rb(entries=(rb.make("EntryData", entity=entity, ops=ops),), validate_only=False))
    for entry in response.entries:
        _check(entry.error_code, entry.error_message)
    if names[0]:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")


def split_scram(added: Mapping[str, str], deleted: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The SCRAM keys of ``added``/``deleted`` (the rest are quotas)."""
    return {k: v for k, v in added.items() if k in MECHANISMS}, [k for k in deleted if k in MECHANISMS]


async def describe_quotas_with_admin(bootstrap: str, types: Sequence[str], names: Sequence[str]) -> None:
    async with AdminClient(bootstrap) as admin:
        conn = await admin.cluster.any_connection()
        rb = conn.builder(ApiKey.DESCRIBE_CLIENT_QUOTAS)
        components = []
        for i, entity_type in enumerate(types):
            name = names[i] if i < len(names) else None
            match_type = SPECIFIED if name is None else DEFAULT if name == "" else EXACT
            components.append(
                rb.make("ComponentData", entity_type=_TYPES[entity_type], match_type=match_type, match=name or None)
            )
        response = await conn.send(rb(components=tuple(components), strict=True))
    _check(response.error_code, response.error_message)
    for entry in response.entries or ():
        parts = {e.entity_type: e.entity_name for e in entry.entity}
        shown = ", ".join(
            f"{_LABELS[t]} '{parts[t]}'" if parts[t] is not None else f"the default {_LABELS[t]}"
            for t in ("user", "client-id", "ip")
            if t in parts
        )
        values = ", ".join(f"{v.key}={java_double(v.value)}" for v in entry.values)
        print(f"Quota configs for {shown} are {values}")

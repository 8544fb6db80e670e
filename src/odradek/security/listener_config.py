"""Listener-prefixed configuration, as Kafka's ``KafkaConfig.valuesWithPrefixOverride``.

A broker key may be given for one listener as ``listener.name.<listener>.<key>``; the listener name
is matched in lower case (Kafka's ``ListenerName.configPrefix``), so
``listener.name.sasl_ssl.ssl.keystore.location`` applies to the listener ``SASL_SSL``. The prefixed
value wins over the unprefixed ``<key>``. SASL keys that depend on the mechanism carry it after the
listener: ``listener.name.<listener>.<mechanism lower case>.sasl.jaas.config``
(:func:`jaas_config_key`). Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LISTENER_PREFIX = "listener.name."


def listener_prefix(listener_name: str) -> str:
    """``listener.name.<listener lower case>.``"""
    return f"{LISTENER_PREFIX}{listener_name.lower()}."


def listener_config(props: Mapping[str, Any], listener_name: str) -> dict[str, Any]:
    """Every key of ``props``, with the listener's prefixed keys stripped and overriding.

    Keys prefixed for other listeners are left as they are (they match no key a consumer asks for).
    """
    prefix = listener_prefix(listener_name)
    resolved = {k: v for k, v in props.items() if not k.startswith(prefix)}
    for key, value in props.items():
        if key.startswith(prefix):
            resolved[key[len(prefix) :]] = value
    return resolved


def jaas_config_key(mechanism: str) -> str:
    """The broker's per-mechanism JAAS key after listener resolution: ``<mechanism>.sasl.jaas.config``."""
    return f"{mechanism.lower()}.sasl.jaas.config"

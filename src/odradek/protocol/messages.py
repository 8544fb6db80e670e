"""Building kio message objects without caring which fields a version has.

Kafka adds fields in later versions; kio generates one frozen dataclass per version, each with
only the fields of that version. :func:`build` takes the superset of fields a handler knows and
keeps those the class has, so a handler writes one response for all versions. A field the class
requires and the caller did not give raises ``TypeError`` (a bug, not a client error).

``nested(cls, "PartitionProduceResponse")`` finds a nested entity class defined beside ``cls``.
Caches are immutable once filled: safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, /, **fields: Any) -> Any:
    """An instance of ``cls`` from the fields in ``fields`` that ``cls`` has."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


@functools.cache
def has_nested(cls: type, name: str) -> bool:
    """Whether ``cls``'s generated module defines the entity ``name`` (cached: a handler asks on
    every request, e.g. Produce for ``BatchIndexAndErrorMessage``, v8+)."""
    return isinstance(getattr(sys.modules[cls.__module__], name, None), type)


@functools.cache
def nested(cls: type, name: str) -> type:
    """The entity class ``name`` defined in the same generated module as ``cls``."""
    found = getattr(sys.modules[cls.__module__], name, None)
    if not isinstance(found, type):
        raise LookupError(f"{cls.__module__} has no entity {name}")
    return found

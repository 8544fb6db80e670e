"""The delegation token messages (CreateDelegationToken 38, RenewDelegationToken 39,
ExpireDelegationToken 40, DescribeDelegationToken 41) where kio's classes do not fit.

- **v0 of all four** (Kafka 3.9 serves them; Kafka 4.0 removed them, so kio lacks them): v0 and v1
  are the same on the wire (v1 only changed when a throttled response is sent, KIP-219), so v0's
  classes are v1's with ``__version__`` 0.
- **The timestamps of Create/Renew/Expire responses** are ``int64`` milliseconds here, where kio
  reads them as datetimes: Kafka answers a refused request with ``-1`` (``ErrorTimestamp``) in
  ``issue_timestamp``/``expiry_timestamp``/``max_timestamp``, which kio's reader rejects as a
  negative timestamp. The wire format is unchanged; handlers and clients see plain integers.

:func:`load` is asked by :func:`odradek.protocol.codec.api_schema` before kio. The classes are built
once, at import, by copying kio's (same fields, same metadata, same nested classes). Immutable module
data: safe from any thread.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.static.primitive import i16, i64

__all__ = ["TOKEN_API_KEYS", "load"]

TOKEN_API_KEYS = (38, 39, 40, 41)
_TIMESTAMP_RESPONSES = (38, 39, 40)
_CLASS_VARS = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")


def _copy(cls: type, version: int, int_timestamps: bool) -> type:
    """``cls`` again with ``__version__ = version`` and, if asked, ``datetime_i64`` fields as ``int64``."""
    fields: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if int_timestamps and kafka_type == "datetime_i64":
            fields.append((f.name, i64, dataclasses.field(metadata={**f.metadata, "kafka_type": "int64"})))
            continue
        kwargs: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        fields.append((f.name, f.type, dataclasses.field(**kwargs)))
    namespace: dict[str, Any] = {name: getattr(cls, name) for name in _CLASS_VARS}
    namespace["__version__"] = i16(version)
    namespace["__annotations__"] = {name: ClassVar for name in _CLASS_VARS}
    made = dataclasses.make_dataclass(cls.__name__, fields, namespace=namespace, frozen=True, slots=True, kw_only=True)
    made.__module__ = cls.__module__  # nested entities are looked up in the generated module
    return made


def _build() -> dict[tuple[int, int], tuple[type, type]]:
    out: dict[tuple[int, int], tuple[type, type]] = {}
    for api_key in TOKEN_API_KEYS:
        for version in range(4):
            source = max(version, 1)
            try:
                request, response = load_request_schema(api_key, source), load_response_schema(api_key, source)
            except Exception:  # past the API's last version
                continue
            fix = api_key in _TIMESTAMP_RESPONSES
            if version == 0:
                request = _copy(request, 0, False)
            if version == 0 or fix:
                response = _copy(response, version, fix)
            out[(api_key, version)] = (request, response)
    return out


_SCHEMAS = _build()


def load(api_key: int, version: int) -> tuple[type, type] | None:
    """(request class, response class) of a delegation token version defined here, or None."""
    return _SCHEMAS.get((api_key, version))

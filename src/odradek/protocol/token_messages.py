"""The delegation token messages (CreateDelegationToken 38, RenewDelegationToken 39,
ExpireDelegationToken 40, DescribeDelegationToken 41) where kio's classes do not fit.

- **v0 of all four** (Kafka 3.9 serves them; Kafka 4.0 removed them, so kio lacks them): v0 and v1
  are the same on the wire (v1 only changed when a throttled response is sent, KIP-219), so v0's
  classes are v1's with ``__version__`` 0.
- **The timestamps of Create/Renew/Expire responses** are ``int64`` milliseconds here, where kio
  reads them as datetimes: Kafka answers a refused request with ``-1`` (``ErrorTimestamp``) in
  ``issue_timestamp``/``expiry_timestamp``/``max_timestamp``, which kio's reader rejects as a
  negative timestamp. The wire format is unchanged; handlers and clients see plain integers.

:func:`load` is asked by :func:`odradek.protocol.codec.api_schema` before kio. A version's classes are
built on its first :func:`load`, under a lock, by copying kio's (same fields, same metadata, same
nested classes); immutable afterwards: safe from any thread.
"""

from __future__ import annotations

import dataclasses
import threading
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


def _build(api_key: int, version: int) -> tuple[type, type] | None:
    source = max(version, 1)
    try:
        request, response = load_request_schema(api_key, source), load_response_schema(api_key, source)
    except Exception:  # past the API's last version
        return None
    fix = api_key in _TIMESTAMP_RESPONSES
    if version == 0:
        request = _copy(request, 0, False)
    if version == 0 or fix:
        response = _copy(response, version, fix)
    return request, response


_SCHEMAS: dict[tuple[int, int], tuple[type, type] | None] = {}
"""(api key, version) -> its classes (None past the API's last version), built on first use."""
_BUILD_LOCK = threading.Lock()


def load(api_key: int, version: int) -> tuple[type, type] | None:
    """(request class, response class) of a delegation token version defined here, or None.
    The first call for a version builds its classes; later calls return the same ones. Any thread."""
    if api_key not in TOKEN_API_KEYS or not 0 <= version <= 3:
        return None
    key = (api_key, version)
    if key in _SCHEMAS:
        return _SCHEMAS[key]
    with _BUILD_LOCK:  # one build per version, so every caller sees the same classes
        if key not in _SCHEMAS:
            _SCHEMAS[key] = _build(api_key, version)
        return _SCHEMAS[key]

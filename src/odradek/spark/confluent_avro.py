"""Decoding Confluent-framed Avro values for the ``valueSchemaRegistry`` read option.

A framed value is magic byte 0, a 4-byte big-endian schema id, then the Avro binary encoding of
one datum (what confluent-kafka's ``AvroSerializer`` writes). :class:`ValueDecoder` fetches each
id's writer schema once from the registry (``GET /schemas/ids/{id}``, Confluent's REST API),
parses it with fastavro and decodes values with ``schemaless_reader``. Each value becomes
``(schema id, the datum as JSON text)``; a value that is null, not framed, of a non-Avro schema,
or that does not decode gives ``(id or None, None)`` (Spark's permissive ``from_avro``), so one bad
record never fails the task. The JSON renders bytes and fixed as ISO-8859-1 text (Avro's JSON
encoding), and decimals, dates and timestamps as their string forms.

Instances live in executor workers, one per read task; the schema cache is per process.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import urllib.parse
import urllib.request
from typing import Any

_CACHE: dict[tuple[str, int], Any] = {}
_LOCK = threading.Lock()
_ACCEPT = "application/vnd.schemaregistry.v1+json"


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    return str(value)


class ValueDecoder:
    """Decodes framed Avro values with schemas from the registry at ``url``."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        parts = urllib.parse.urlsplit(url)
        self.base = urllib.parse.urlunsplit((parts.scheme, parts.hostname or "", "", "", "")).rstrip("/")
        if parts.port:
            self.base += f":{parts.port}"
        self.base += parts.path.rstrip("/")
        self.auth = None
        if parts.username is not None:
            creds = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            self.auth = "Basic " + base64.b64encode(creds.encode()).decode()
        self.timeout_s = timeout_s

    def _schema(self, schema_id: int) -> Any:
        key = (self.base, schema_id)
        with _LOCK:
            if key in _CACHE:
                return _CACHE[key]
        import fastavro

        request = urllib.request.Request(f"{self.base}/schemas/ids/{schema_id}", headers={"Accept": _ACCEPT})
        if self.auth:
            request.add_header("Authorization", self.auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                body = json.loads(answer.read())
            parsed = None
            if body.get("schemaType", "AVRO") == "AVRO" and not body.get("references"):
                parsed = fastavro.parse_schema(json.loads(body["schema"]))
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
            parsed = None  # unknown id: such values decode to null
        with _LOCK:
            _CACHE[key] = parsed
        return parsed

    def decode(self, value: bytes | None) -> tuple[int | None, str | None]:
        if value is None or len(value) < 5 or value[0] != 0:
            return None, None
        schema_id = int.from_bytes(value[1:5], "big", signed=True)
        schema = self._schema(schema_id)
        if schema is None:
            return schema_id, None
        import fastavro

        try:
            datum = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, None)
        except Exception:
            return schema_id, None
        return schema_id, json.dumps(datum, default=_default, separators=(",", ":"))

"""The records of the ``_schemas`` topic, in Confluent Schema Registry's JSON.

Keys (JSON objects, properties in this order, no spaces, so equal keys are equal bytes and the
log cleaner keeps only the last value of each)::

    {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    {"keytype":"CONFIG","subject":"s"|null,"magic":0}
    {"keytype":"MODE","subject":"s"|null,"magic":0}
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}
    {"keytype":"NOOP","magic":0}

Values: SCHEMA ``{"subject","version","id","schemaType"(absent for AVRO),"references","metadata",
"ruleSet","schema","deleted"}``; CONFIG ``{"compatibilityLevel": "BACKWARD", ...}``; MODE
``{"mode": "READWRITE"}``; DELETE_SUBJECT ``{"subject","version"}`` (every version up to it is
soft deleted); CLEAR_SUBJECT ``{"subject"}``; NOOP null. A null value (tombstone) removes the key:
a hard-deleted version, a deleted config or mode. Key types this module does not know (``CONTEXT``,
newer ones) decode to ``None`` and are skipped by the reader, as are keys that are not JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEY_TYPES = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")


@dataclass(frozen=True, slots=True)
class RegistryKey:
    """A decoded ``_schemas`` key; ``version`` only for SCHEMA keys, ``subject`` None for global ones."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"keytype": self.keytype}
        if self.keytype == "NOOP":
            obj["magic"] = 0
        elif self.keytype == "SCHEMA":
            obj.update(subject=self.subject, version=self.version, magic=1)
        else:
            obj.update(subject=self.subject, magic=0)
        return json.dumps(obj, separators=(",", ":")).encode()


def decode_key(raw: bytes | None) -> RegistryKey | None:
    """The key of a record, or None for a key that is not JSON or of a type not known here."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("keytype") not in KEY_TYPES:
        return None
    keytype = str(obj["keytype"])
    subject = obj.get("subject")
    if subject is not None and not isinstance(subject, str):
        return None
    version = obj.get("version")
    if keytype == "SCHEMA" and (not isinstance(version, int) or subject is None):
        return None
    if keytype in ("DELETE_SUBJECT", "CLEAR_SUBJECT") and subject is None:
        return None
    return RegistryKey(keytype, subject, version if keytype == "SCHEMA" else None)


@dataclass(slots=True)
class SchemaValue:
    """One version of a subject (the value of a SCHEMA key)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = None
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            obj["schemaType"] = self.schema_type
        if self.references:
            obj["references"] = self.references
        if self.metadata is not None:
            obj["metadata"] = self.metadata
        if self.rule_set is not None:
            obj["ruleSet"] = self.rule_set
        obj["schema"] = self.schema
        obj["deleted"] = self.deleted
        return obj

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SchemaValue | None:
        """The value, or None when it is not a well-formed SCHEMA value."""
        try:
            obj = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        subject, version, id_, schema = obj.get("subject"), obj.get("version"), obj.get("id"), obj.get("schema")
        if not (isinstance(subject, str) and isinstance(version, int) and isinstance(id_, int)):
            return None
        if not isinstance(schema, str):
            return None
        refs = obj.get("references") or []
        metadata = obj.get("metadata")
        rule_set = obj.get("ruleSet")
        return cls(
            subject,
            version,
            id_,
            schema,
            str(obj.get("schemaType") or "AVRO"),
            [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else [],
            metadata if isinstance(metadata, dict) else None,
            rule_set if isinstance(rule_set, dict) else None,
            bool(obj.get("deleted", False)),
        )


def encode_json(obj: dict[str, Any] | None) -> bytes | None:
    """A CONFIG / MODE / DELETE_SUBJECT / CLEAR_SUBJECT value (None stays a tombstone)."""
    return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()


def decode_json(raw: bytes | None) -> dict[str, Any] | None:
    """A JSON object value; None for a tombstone or anything that is not a JSON object."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None

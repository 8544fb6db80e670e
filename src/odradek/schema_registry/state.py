"""The registry's in-memory state, rebuilt by applying the ``_schemas`` records in offset order.

Pure data, no I/O: :meth:`RegistryState.apply` takes one record (key bytes, value bytes or None)
and updates the maps. The reader task of :mod:`odradek.schema_registry.kafka_store` is its only
writer; request handlers on the same event loop read it between awaits, so no lock is needed.

Edge cases follow Confluent's ``KafkaStoreMessageHandler`` and ``InMemoryCache``: a tombstone on a
SCHEMA key hard-deletes that version (the id stays resolvable while another version uses it); a
DELETE_SUBJECT marks every version up to its ``version`` soft deleted; a CLEAR_SUBJECT forgets
the subject's soft-deleted versions; records that do not decode are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.schema_registry.records import RegistryKey, SchemaValue, decode_json, decode_key

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


@dataclass(slots=True)
class RegistryState:
    """Subjects, versions, ids, configs and modes as read from ``_schemas``."""

    versions: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    """subject -> version -> value (soft-deleted ones included, flagged ``deleted``)."""
    by_id: dict[int, SchemaValue] = field(default_factory=dict)
    """global id -> the first value seen with it (its schema text, type and references)."""
    configs: dict[str | None, dict[str, object]] = field(default_factory=dict)
    """subject (None: global) -> CONFIG value."""
    modes: dict[str | None, str] = field(default_factory=dict)
    ids_by_subject: dict[str, frozenset[int]] = field(default_factory=dict)
    """subject -> ids of its live versions; each set is replaced, never changed, so the broker's
    loop may read it from another thread (schema validation)."""
    max_id: int = 0
    records_applied: int = 0

    def apply(self, raw_key: bytes | None, raw_value: bytes | None) -> RegistryKey | None:
        """Apply one record; returns its key, or None when the record was skipped."""
        key = decode_key(raw_key)
        if key is None:
            return None
        self.records_applied += 1
        if key.keytype == "SCHEMA":
            self._apply_schema(key, raw_value)
        elif key.keytype == "CONFIG":
            value = decode_json(raw_value)
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = value
        elif key.keytype == "MODE":
            mode = (decode_json(raw_value) or {}).get("mode")
            if isinstance(mode, str) and mode in MODES:
                self.modes[key.subject] = mode
            else:
                self.modes.pop(key.subject, None)
        else:
            self._apply_subject(key, raw_value)
        if key.subject is not None and key.keytype in ("SCHEMA", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
            live = self.versions.get(key.subject, {})
            self.ids_by_subject[key.subject] = frozenset(v.id for v in live.values() if not v.deleted)
        return key

    def _apply_subject(self, key: RegistryKey, raw_value: bytes | None) -> None:
        if key.keytype == "DELETE_SUBJECT":
            upto = (decode_json(raw_value) or {}).get("version")
            for version, schema in self.versions.get(key.subject or "", {}).items():
                if isinstance(upto, int) and version <= upto:
                    schema.deleted = True
        elif key.keytype == "CLEAR_SUBJECT":
            versions = self.versions.get(key.subject or "", {})
            for version in [v for v, schema in versions.items() if schema.deleted]:
                del versions[version]
            if not versions:
                self.versions.pop(key.subject or "", None)

    def _apply_schema(self, key: RegistryKey, raw_value: bytes | None) -> None:
        subject, version = key.subject or "", key.version or 0
        if raw_value is None:
            versions = self.versions.get(subject, {})
            versions.pop(version, None)
            if not versions:
                self.versions.pop(subject, None)
            return
        value = SchemaValue.decode(raw_value)
        if value is None or value.subject != subject or value.version != version:
            return
        self.versions.setdefault(subject, {})[version] = value
        self.by_id.setdefault(value.id, value)
        self.max_id = max(self.max_id, value.id)

    # --- reads -------------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False) -> list[str]:
        """Subjects with a live version (or any version with ``deleted``), sorted."""
        return sorted(
            s for s, vs in self.versions.items() if vs and (deleted or any(not v.deleted for v in vs.values()))
        )

    def live_versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """The versions of ``subject`` in ascending order (soft-deleted ones only with ``deleted``)."""
        vs = self.versions.get(subject, {})
        return [vs[v] for v in sorted(vs) if deleted or not vs[v].deleted]

    def uses_of(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        """Every (subject, version) holding ``schema_id``, by subject then version."""
        return [
            value
            for subject in sorted(self.versions)
            for value in self.live_versions(subject, deleted=deleted)
            if value.id == schema_id
        ]

    def is_used(self, schema_id: int) -> bool:
        """Whether some version (soft-deleted included) still holds ``schema_id``: the first
        value seen with it usually does, so this is one lookup."""
        first = self.by_id.get(schema_id)
        if first is None:
            return False
        if self.versions.get(first.subject, {}).get(first.version) is first:
            return True
        return any(v.id == schema_id for vs in self.versions.values() for v in vs.values())

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name ``subject`` at ``version``."""
        out = set()
        for vs in self.versions.values():
            for value in vs.values():
                if value.deleted:
                    continue
                for ref in value.references:
                    if ref.get("subject") == subject and ref.get("version") == version:
                        out.add(value.id)
        return sorted(out)

    def compatibility(self, subject: str | None) -> str | None:
        """The subject's own level (None when it has none); ``subject=None`` the global one."""
        level = self.configs.get(subject, {}).get("compatibilityLevel")
        return level if isinstance(level, str) else None

    def effective_compatibility(self, subject: str) -> str:
        return self.compatibility(subject) or self.compatibility(None) or "BACKWARD"

    def effective_mode(self, subject: str | None) -> str:
        return (self.modes.get(subject) if subject is not None else None) or self.modes.get(None) or "READWRITE"

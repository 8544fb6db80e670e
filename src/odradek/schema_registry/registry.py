"""The registry's operations (Confluent's ``KafkaSchemaRegistry``) over a :class:`KafkaStore`.

Reads answer from the in-memory state. Writes run on the leader only (the API layer forwards
them otherwise), one at a time under a lock, and return once ``_schemas`` has been read back.
Request bodies arrive as decoded JSON objects; every method validates what it uses and raises
:class:`~odradek.schema_registry.errors.RestError` subclasses with Confluent's codes.

Ids: a schema (type, identity of its text, references, metadata, rule set) already registered
under any subject keeps its id; a new one takes ``max id + 1`` as seen by the leader after it
caught up with the topic at election. Versions: one more than the subject's highest version,
soft-deleted ones included. Threading: one event loop; schema parsing runs in worker threads.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from odradek.schema_registry import errors as e
from odradek.schema_registry.kafka_store import KafkaStore
from odradek.schema_registry.records import RegistryKey, SchemaValue, encode_json
from odradek.schema_registry.schemas import (
    SCHEMA_TYPES,
    ParsedSchema,
    Reference,
    check_compatibility,
    normalized,
    parse,
)
from odradek.schema_registry.state import COMPATIBILITY_LEVELS, MODES

MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int:
    """``latest`` and ``-1`` give -1; an integer in [1, 2^31-1] itself; anything else 42202."""
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        version = 0
    if version == -1 or 1 <= version <= MAX_VERSION:
        return version
    raise e.InvalidVersion(
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"'
    )


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class SchemaRegistry:
    """Operations of the REST API; ``store`` must be started before any is called."""

    def __init__(self, store: KafkaStore, max_schema_bytes: int = 10 * 1024 * 1024) -> None:
        self.store = store
        self.state = store.state
        self.max_schema_bytes = max_schema_bytes
        self._write_lock = asyncio.Lock()
        self._parsed: dict[tuple[str, int], ParsedSchema] = {}
        self._identity_by_id: dict[int, str] = {}
        self._id_by_identity: dict[str, int] = {}
        """The inverse, for ids whose identity is known: a registration finds an existing id in
        one lookup once every stored schema's identity is (see :meth:`warm_up`)."""

    # --- parsing ----------------------------------------------------------------------------

    def _references(self, refs: list[dict[str, Any]], depth: int = 0) -> list[Reference]:
        """Resolve references (dependencies first); 42201 when one is missing."""
        if depth > 32:
            raise e.InvalidSchema("Invalid schema: references nested too deeply")
        out: list[Reference] = []
        for ref in refs:
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int):
                raise e.InvalidSchema("Invalid schema: a reference needs a name, a subject and a version")
            target = self.state.versions.get(subject, {}).get(version)
            if target is None and version == -1:
                live = self.state.live_versions(subject)
                target = live[-1] if live else None
            if target is None:
                raise e.InvalidSchema(f"Invalid schema: reference {name} to {subject} version {version} not found")
            out += self._references(target.references, depth + 1)
            out.append(Reference(name, target.schema))
        return out

    async def _parse(self, schema_type: str, text: str, refs: list[dict[str, Any]]) -> ParsedSchema:
        resolved = self._references(refs)
        return await asyncio.to_thread(parse, schema_type, text, resolved)

    async def _parse_request(
        self, subject: str, schema_type: str, text: str, refs: list[dict[str, Any]], *, normalize: bool
    ) -> tuple[str, ParsedSchema]:
        """The text to use and its parse: normalized (see :func:`normalized`) when the request
        asks (``normalize=true``) or the subject's config (else the global one) says
        ``"normalize": true``, except in IMPORT mode, which keeps schemas as given (Confluent's
        rule); otherwise ``text`` as sent."""
        resolved = self._references(refs)
        if self._normalizing(subject, normalize):
            return await asyncio.to_thread(normalized, schema_type, text, resolved)
        return text, await asyncio.to_thread(parse, schema_type, text, resolved)

    def _normalizing(self, subject: str, normalize: bool) -> bool:
        if self.state.effective_mode(subject) == "IMPORT":
            return False
        configured = self.state.configs.get(subject, {}).get("normalize")
        if configured is None:
            configured = self.state.configs.get(None, {}).get("normalize")
        return normalize or configured is True

    async def parsed(self, value: SchemaValue) -> ParsedSchema:
        """A stored schema parsed (cached by subject and version)."""
        key = (value.subject, value.version)
        cached = self._parsed.get(key)
        if cached is None or self.state.versions.get(value.subject, {}).get(value.version) is not value:
            cached = await self._parse(value.schema_type, value.schema, value.references)
            self._parsed[key] = cached
        return cached

    def _identity(self, schema_type: str, parsed: ParsedSchema, body: dict[str, Any]) -> str:
        return _canonical(
            [schema_type, parsed.identity, body.get("references") or [], body.get("metadata"), body.get("ruleSet")]
        )

    async def _identity_of(self, value: SchemaValue) -> str:
        ident = self._identity_by_id.get(value.id)
        if ident is None:
            parsed = await self.parsed(value)
            ident = self._identity(value.schema_type, parsed, value.to_json())
            self._identity_by_id[value.id] = ident
            self._id_by_identity.setdefault(ident, value.id)
        return ident

    def _body(self, body: Any) -> tuple[str, str, list[dict[str, Any]]]:
        """Schema type, text and references of a register / lookup / compatibility body."""
        if not isinstance(body, dict):
            raise e.BadRequest("The request body must be a JSON object")
        schema = body.get("schema")
        schema_type = body.get("schemaType") or "AVRO"
        refs = body.get("references") or []
        if not isinstance(schema, str) or not schema:
            raise e.InvalidSchema("Empty schema")
        if len(schema.encode()) > self.max_schema_bytes:
            raise e.SchemaTooLarge(f"Schema of {len(schema)} characters exceeds {self.max_schema_bytes} bytes")
        if not isinstance(schema_type, str) or schema_type not in SCHEMA_TYPES:
            raise e.InvalidSchema(f"Invalid schema type {schema_type}")
        if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
            raise e.BadRequest("references must be a list of objects")
        for field in ("metadata", "ruleSet"):
            if body.get(field) is not None and not isinstance(body[field], dict):
                raise e.BadRequest(f"{field} must be an object")
        return schema_type, schema, refs

    async def warm_up(self) -> None:
        """Compute the identity of every stored schema (in worker threads), so the first new
        registration after a start does not parse them all while its client waits. A schema that
        no longer parses is skipped (its identity is computed, and fails, when it is needed)."""
        for value in list(self.state.by_id.values()):
            if value.id not in self._identity_by_id:
                try:
                    await self._identity_of(value)
                except e.RestError:
                    continue

    # --- reads ------------------------------------------------------------------------------

    def subject_versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        versions = self.state.live_versions(subject, deleted=deleted)
        if not versions:
            raise e.SubjectNotFound(f"Subject '{subject}' not found.")
        return versions

    def get_version(self, subject: str, version_text: str, *, deleted: bool = False) -> SchemaValue:
        version = parse_version(version_text)
        if subject not in self.state.versions:
            raise e.SubjectNotFound(f"Subject '{subject}' not found.")
        if version == -1:
            live = self.state.live_versions(subject, deleted=deleted)
            if not live:
                raise e.SubjectNotFound(f"Subject '{subject}' not found.")
            return live[-1]
        value = self.state.versions[subject].get(version)
        if value is None or (value.deleted and not deleted):
            raise e.VersionNotFound(f"Version {version} not found.")
        return value

    def schema_by_id(self, schema_id: int) -> SchemaValue:
        value = self.state.by_id.get(schema_id)
        if value is None or not self.state.is_used(schema_id):
            raise e.SchemaNotFound(f"Schema {schema_id} not found")
        return value

    async def lookup(self, subject: str, body: Any, *, normalize: bool, deleted: bool) -> SchemaValue:
        """``POST /subjects/{subject}``: the version of ``subject`` holding this schema."""
        schema_type, text, refs = self._body(body)
        if subject not in self.state.versions:
            raise e.SubjectNotFound(f"Subject '{subject}' not found.")
        _, parsed = await self._parse_request(subject, schema_type, text, refs, normalize=normalize)
        wanted = self._identity(schema_type, parsed, body)
        for value in reversed(self.state.live_versions(subject, deleted=deleted)):
            if await self._identity_of(value) == wanted:
                return value
        raise e.SchemaNotFound("Schema not found")

    async def compatible(self, subject: str, version_text: str | None, body: Any, *, normalize: bool) -> list[str]:
        """``/compatibility``: why the schema is incompatible with one version (or, with
        ``version_text`` None, with those the subject's level compares with)."""
        schema_type, text, refs = self._body(body)
        _, parsed = await self._parse_request(subject, schema_type, text, refs, normalize=normalize)
        level = self.state.effective_compatibility(subject)
        if version_text is None:
            previous = self.state.live_versions(subject)
        else:
            version = parse_version(version_text)
            if version == -1:
                live = self.state.live_versions(subject)
                previous = live[-1:]
            else:
                previous = [self.get_version(subject, version_text)]
        olds = [await self.parsed(v) for v in previous]
        return check_compatibility(level, parsed, olds)

    # --- writes (leader only) ---------------------------------------------------------------

    def _check_writable(self, subject: str | None) -> None:
        """Deletes and config changes are refused only in read-only modes (42205)."""
        if self.state.effective_mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise e.OperationNotPermitted(f"Subject {subject} is in read-only mode")

    async def register(self, subject: str, body: Any, *, normalize: bool) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: ``{"id": id}`` (409 when incompatible)."""
        schema_type, text, refs = self._body(body)
        _check_subject(subject)
        requested_id = body.get("id")
        requested_version = body.get("version")
        mode = self.state.effective_mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise e.OperationNotPermitted(f"Subject {subject} is in read-only mode")
        if requested_id is not None and (type(requested_id) is not int or requested_id < 0):
            requested_id = None  # Confluent's -1: no id asked for
        if requested_id is not None and mode != "IMPORT":
            raise e.OperationNotPermitted(f"Subject {subject} is not in import mode")
        if requested_id is None and mode != "READWRITE":
            raise e.OperationNotPermitted(f"Subject {subject} is not in read-write mode")
        text, parsed = await self._parse_request(subject, schema_type, text, refs, normalize=normalize)
        ident = self._identity(schema_type, parsed, body)
        async with self._write_lock:
            live = self.state.live_versions(subject)
            for value in reversed(live):
                if await self._identity_of(value) == ident:
                    return {"id": value.id, "version": value.version}
            if mode != "IMPORT":
                level = self.state.effective_compatibility(subject)
                olds = [await self.parsed(v) for v in live]
                messages = check_compatibility(level, parsed, olds)
                if messages:
                    raise e.IncompatibleSchema(
                        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                        f"details: {messages}"
                    )
            schema_id = requested_id if isinstance(requested_id, int) else None
            if schema_id is not None:
                existing = self.state.by_id.get(schema_id)
                if existing is not None and await self._identity_of(existing) != ident:
                    raise e.OperationNotPermitted(f"Overwrite new schema with id {schema_id} is not permitted.")
            else:
                schema_id = self._id_by_identity.get(ident)
                if schema_id is None and len(self._identity_by_id) < len(self.state.by_id):
                    for value in list(self.state.by_id.values()):
                        if value.schema_type == schema_type and await self._identity_of(value) == ident:
                            schema_id = value.id
                            break
            if schema_id is None:
                schema_id = self.state.max_id + 1
            all_versions = self.state.versions.get(subject, {})
            version = (max(all_versions) if all_versions else 0) + 1
            if isinstance(requested_version, int) and mode == "IMPORT" and requested_version > 0:
                version = requested_version
            value = SchemaValue(
                subject, version, schema_id, text, schema_type, refs, body.get("metadata"), body.get("ruleSet")
            )
            await self.store.put(RegistryKey("SCHEMA", subject, version), value.encode())
            self._identity_by_id.setdefault(schema_id, ident)
            self._id_by_identity.setdefault(ident, schema_id)
        return {"id": schema_id, "version": version}

    async def delete_version(self, subject: str, version_text: str, *, permanent: bool) -> int:
        """``DELETE /subjects/{subject}/versions/{version}``: the deleted version number."""
        self._check_writable(subject)
        async with self._write_lock:
            value = self.get_version(subject, version_text, deleted=True)
            if parse_version(version_text) == -1 and not permanent:
                value = self.get_version(subject, version_text)
            if self.state.referenced_by(subject, value.version):
                raise e.ReferenceExists(
                    f"One or more references exist to the schema {{subject={subject},version={value.version}}}"
                )
            key = RegistryKey("SCHEMA", subject, value.version)
            if permanent:
                if not value.deleted:
                    raise e.VersionNotSoftDeleted(
                        f"Subject '{subject}' Version {value.version} was not deleted first before being "
                        "permanently deleted"
                    )
                await self.store.put(key, None)
            else:
                if value.deleted:
                    raise e.VersionSoftDeleted(
                        f"Subject '{subject}' Version {value.version} was soft deleted. Set permanent=true to "
                        "delete permanently"
                    )
                deleted = SchemaValue(**{**_fields(value), "deleted": True})
                records: list[tuple[RegistryKey, bytes | None]] = [(key, deleted.encode())]
                if not [v for v in self.state.live_versions(subject) if v.version != value.version]:
                    records += self._subject_settings_tombstones(subject)
                await self.store.put_many(records)
            return value.version

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        """``DELETE /subjects/{subject}``: the versions deleted."""
        self._check_writable(subject)
        async with self._write_lock:
            every = self.state.live_versions(subject, deleted=True)
            if not every:
                raise e.SubjectNotFound(f"Subject '{subject}' not found.")
            live = [v for v in every if not v.deleted]
            for v in live if not permanent else every:
                if self.state.referenced_by(subject, v.version):
                    raise e.ReferenceExists(f"One or more references exist to the schema {{subject={subject}}}")
            if permanent:
                if live:
                    raise e.SubjectNotSoftDeleted(
                        f"Subject '{subject}' was not deleted first before being permanently deleted"
                    )
                await self.store.put_many([(RegistryKey("SCHEMA", subject, v.version), None) for v in every])
                return [v.version for v in every]
            if not live:
                raise e.SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
                )
            watermark = encode_json({"subject": subject, "version": live[-1].version})
            await self.store.put_many(
                [(RegistryKey("DELETE_SUBJECT", subject), watermark), *self._subject_settings_tombstones(subject)]
            )
            return [v.version for v in live]

    def _subject_settings_tombstones(self, subject: str) -> list[tuple[RegistryKey, bytes | None]]:
        """A subject whose last live version goes loses its config and mode, as Confluent's does."""
        out: list[tuple[RegistryKey, bytes | None]] = []
        if subject in self.state.configs:
            out.append((RegistryKey("CONFIG", subject), None))
        if subject in self.state.modes:
            out.append((RegistryKey("MODE", subject), None))
        return out

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        """``PUT /config[/{subject}]``: the new config as answered (``{"compatibility": ...}``)."""
        if not isinstance(body, dict):
            raise e.BadRequest("The request body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS):
            raise e.InvalidCompatibilityLevel(
                "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
                "forward_transitive, and full_transitive"
            )
        if subject is not None:
            _check_subject(subject)
        self._check_writable(subject)
        stored: dict[str, Any] = {k: v for k, v in body.items() if k not in ("compatibility", "compatibilityLevel")}
        current = self.state.configs.get(subject, {})
        stored = {**current, **stored}
        if level is not None:
            stored["compatibilityLevel"] = level.upper()
        async with self._write_lock:
            await self.store.put(RegistryKey("CONFIG", subject), encode_json(stored))
        answer = {k: v for k, v in stored.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in stored:
            answer["compatibility"] = stored["compatibilityLevel"]
        return answer

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        """``DELETE /config[/{subject}]``: the config that was deleted."""
        if subject is not None and subject not in self.state.versions:
            raise e.SubjectNotFound(f"Subject '{subject}' not found.")
        self._check_writable(subject)
        previous = self.state.configs.get(subject, {})
        async with self._write_lock:
            await self.store.put(RegistryKey("CONFIG", subject), None)
        return previous or {"compatibilityLevel": "BACKWARD"}

    async def set_mode(self, subject: str | None, body: Any, *, force: bool) -> dict[str, Any]:
        """``PUT /mode[/{subject}]``: ``{"mode": ...}``."""
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise e.InvalidMode("Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT.")
        mode = mode.upper()
        if subject is not None:
            _check_subject(subject)
        if mode == "IMPORT" and not force:
            has = self.state.live_versions(subject) if subject is not None else self.state.subjects()
            if has:
                raise e.OperationNotPermitted(
                    "Cannot import since found existing subjects"
                    if subject is None
                    else f"Cannot import since found existing schemas for subject {subject}"
                )
        async with self._write_lock:
            await self.store.put(RegistryKey("MODE", subject), encode_json({"mode": mode}))
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        previous = self.state.modes.get(subject)
        if previous is None:
            raise e.SubjectModeNotFound(f"Subject '{subject}' does not have subject-level mode configured")
        async with self._write_lock:
            await self.store.put(RegistryKey("MODE", subject), None)
        return {"mode": previous}


def _check_subject(subject: str) -> None:
    if not subject or any(ord(c) < 32 for c in subject) or (subject.startswith(":.") and ":" not in subject[2:]):
        raise e.InvalidSubject(f"Invalid subject {subject!r}")


def _fields(value: SchemaValue) -> dict[str, Any]:
    return {name: getattr(value, name) for name in SchemaValue.__slots__}

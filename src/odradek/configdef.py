"""Typed configuration definitions, Kafka's ``ConfigDef`` in small.

A :class:`ConfigDef` is an ordered table of :class:`ConfigKey` (name, type, default, validator, doc).
``parse(props)`` turns a ``dict[str, str]`` (a ``server.properties`` file, ``--override k=v`` pairs,
or topic overrides from the metadata store) into typed values, raising
:class:`~odradek.errors.InvalidConfigError` with one clear sentence for an unknown key (unless
``allow_unknown``), a value that does not parse, or a value outside its range.

Types and their string forms (as Kafka): ``int``/``long`` decimal; ``double``; ``boolean``
``true``/``false`` (any case); ``string``; ``list`` comma-separated, blanks dropped; ``password`` as
string, never printed. ``None`` as a default means "no value" (Kafka's ``null``).

The same tables generate ``docs/configuration.md`` (a unit test keeps the page in sync).
Pure data and functions: safe to call from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.errors import InvalidConfigError

Validator = Callable[[Any], str | None]
"""Returns None when the value is acceptable, else the reason it is not."""

TYPES = ("int", "long", "double", "boolean", "string", "list", "password")


def at_least(low: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or value >= low else f"must be at least {low}"

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or low <= value <= high else f"must be between {low} and {high}"

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if v is not None and v not in choices]
        return f"must be one of {', '.join(choices)}" if bad else None

    return check


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any
    doc: str
    validator: Validator | None = None
    synonyms: tuple[str, ...] = ()
    """Other keys that set the same value (Kafka's ``log.roll.hours`` for ``log.roll.ms``, ...)."""

    def parse(self, raw: Any) -> Any:
        """Parse ``raw`` (a string, or an already-typed value) into this key's type."""
        value = _convert(self.name, self.type, raw)
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise InvalidConfigError(f"Invalid value {raw!r} for configuration {self.name}: {problem}")
        return value

    def default_text(self) -> str:
        if self.default is None:
            return "null"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, list):
            return ",".join(self.default) or '""'
        return str(self.default)


def _convert(name: str, type_: str, raw: Any) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        if type_ == "list" and isinstance(raw, (list, tuple)):
            return [str(v) for v in raw]
        return raw
    text = raw.strip()
    try:
        if type_ in ("int", "long"):
            return int(text)
        if type_ == "double":
            return float(text)
        if type_ == "boolean":
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if type_ == "list":
            return [part.strip() for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw!r} for configuration {name}: expected a value of type {type_}"
        ) from None
    return raw


@dataclass
class ConfigDef:
    """An ordered table of keys; ``parse`` validates a whole property map at once."""

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(
        self,
        name: str,
        type_: str,
        default: Any,
        doc: str,
        validator: Validator | None = None,
        synonyms: Iterable[str] = (),
    ) -> ConfigDef:
        assert type_ in TYPES, type_
        self.keys[name] = ConfigKey(name, type_, default, doc, validator, tuple(synonyms))
        return self

    def include(self, other: ConfigDef) -> ConfigDef:
        """Define every key of ``other`` here too, in its order."""
        self.keys.update(other.keys)
        return self

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def defaults(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.keys.values()}

    def parse(self, props: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
        """Typed values for every key: the defaults, overridden by ``props``.

        Raises InvalidConfigError for the first unknown key (unless ``allow_unknown``) or bad value.
        """
        values = self.defaults()
        for name, raw in props.items():
            key = self.keys.get(name)
            if key is None:
                if allow_unknown:
                    continue
                raise InvalidConfigError(f"Unknown configuration {name!r}")
            values[name] = key.parse(raw)
        return values

    def validate_one(self, name: str, raw: Any) -> Any:
        key = self.keys.get(name)
        if key is None:
            raise InvalidConfigError(f"Unknown configuration {name!r}")
        return key.parse(raw)


def render_markdown_table(definition: ConfigDef) -> str:
    """The table ``docs/configuration.md`` carries for ``definition`` (kept in sync by a test)."""
    rows = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for key in definition.keys.values():
        doc = key.doc.replace("|", "\\|")
        rows.append(f"| `{key.name}` | {key.type} | `{key.default_text()}` | {doc} |")
    return "\n".join(rows)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``k=v`` or ``k: v`` lines, ``#``/``!`` comments, ``\\`` continuation."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1 :].strip()
                break
        else:
            key, value = line.strip(), ""
        props[key] = value
    return props

"""Kerberos principal names and Kafka's ``sasl.kerberos.principal.to.local.rules``.

A Kerberos name is ``service[/host][@REALM]`` (Kafka's ``KerberosName.parse``: each part is one or
more characters other than ``/`` and ``@``; anything else is refused). Its short name, the ``User:``
principal of a GSSAPI session, comes from the first rule that applies (Kafka's
``KerberosShortNamer``). Rules are a list (the config key is a comma-separated list, default
``DEFAULT``); each is one of:

- ``DEFAULT``: the first component when the name's realm is the default realm
  (``alice@EXAMPLE.COM`` -> ``alice``, ``kafka/host@EXAMPLE.COM`` -> ``kafka``); nothing otherwise;
- ``RULE:[n:format](regexp)s/pattern/replacement/g/L`` where ``n`` is the number of components the
  rule applies to (1 for ``alice@R``, 2 for ``kafka/host@R``); ``format`` builds a string from
  ``$0`` (the realm), ``$1`` (the first component) and ``$2`` (the host); the optional
  ``(regexp)`` must match that whole string; the optional ``s/pattern/replacement/`` substitutes
  the first match (every match with ``g``; ``$1`` in the replacement is a group, as Java's
  ``replaceAll``); a trailing ``/L`` lower-cases and ``/U`` upper-cases the result.

A result holding ``/`` or ``@`` is refused (Kafka's "Non-simple name"); a name no rule applies to
raises :class:`NoMatchingRule`. A name with no realm keeps its first component. Parsing raises
:class:`~odradek.errors.InvalidConfigError` naming the key and the bad rule. Pure, any thread,
except :func:`default_realm`, which reads the Kerberos configuration (``KRB5_CONFIG``) through
MIT krb5.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from odradek.errors import InvalidConfigError
from odradek.security.principal import java_replacement

__all__ = [
    "KerberosName",
    "KerberosRule",
    "KerberosShortNamer",
    "NoMatchingRule",
    "default_realm",
    "parse_rules",
]

RULES_KEY = "sasl.kerberos.principal.to.local.rules"
_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")
_RULE = re.compile(r"((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?))")
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(Exception):
    """No rule maps the name, or the one that applied produced a name with ``/`` or ``@``."""


@dataclass(frozen=True, slots=True)
class KerberosName:
    service_name: str
    host_name: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        """``service[/host][@REALM]``; ValueError for anything else (empty parts, extra ``/``/``@``)."""
        match = _NAME.fullmatch(principal)
        if match is None:
            if "@" in principal:
                raise ValueError(f"Malformed Kerberos name: {principal}")
            return cls(principal)
        return cls(match.group(1), match.group(3), match.group(5))

    def __str__(self) -> str:
        text = self.service_name
        if self.host_name is not None:
            text += f"/{self.host_name}"
        if self.realm is not None:
            text += f"@{self.realm}"
        return text


def _java_replacement(replacement: str) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.replaceAll`` replacement (``$n`` a group, digits taken while the number
    stays a valid group, as Java does; ``\\x`` a literal x) as a callable; a group the pattern
    does not have is NoMatchingRule."""

    def expand(match: re.Match[str]) -> str:
        try:
            return java_replacement(replacement, match)
        except ValueError as exc:
            raise NoMatchingRule(f"{exc} in {match.re.pattern}") from None

    return expand


@dataclass(frozen=True)
class KerberosRule:
    """One parsed rule (see the module docstring); ``text`` is the rule as written."""

    text: str
    default_realm: str
    is_default: bool = False
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to_pattern: str = ""
    repeat: bool = False
    to_lower: bool = False
    to_upper: bool = False

    def __str__(self) -> str:
        return self.text

    def apply(self, params: Sequence[str]) -> str | None:
        """The short name for ``params`` = (realm, first component[, host]), or None when the
        rule does not apply. NoMatchingRule for a non-simple result or a ``$n`` out of range."""
        result: str | None = None
        if self.is_default:
            if self.default_realm == params[0]:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = self._replace_parameters(params)
            if self.match is None or self.match.fullmatch(base):
                if self.from_pattern is None:
                    result = base
                else:
                    count = 0 if self.repeat else 1
                    result = self.from_pattern.sub(_java_replacement(self.to_pattern), base, count=count)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if result is not None and self.to_lower:
            return result.lower()
        if result is not None and self.to_upper:
            return result.upper()
        return result

    def _replace_parameters(self, params: Sequence[str]) -> str:
        out: list[str] = []
        for match in _PARAMETER.finditer(self.format):
            out.append(match.group(1))
            if match.group(3):
                index = int(match.group(3))
                if not 0 <= index < len(params):
                    raise NoMatchingRule(
                        f"index {index} from {self.format} is outside of the valid range 0 to {len(params) - 1}"
                    )
                out.append(params[index])
        return "".join(out)


def _compile(text: str | None, rule: str, key: str) -> re.Pattern[str] | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: invalid regular expression in {rule}: {e}"
        ) from None


def parse_rules(rules: Iterable[str], default_realm: str, *, key: str = RULES_KEY) -> list[KerberosRule]:
    """Kafka's ``KerberosShortNamer.parseRules``: each item one whole rule; InvalidConfigError otherwise."""
    parsed: list[KerberosRule] = []
    for raw in rules:
        rule = raw.strip()
        match = _RULE.match(rule)
        if match is None:
            raise InvalidConfigError(f"Invalid value for configuration {key}: Invalid rule: {rule}")
        if match.end() != len(rule):
            raise InvalidConfigError(
                f"Invalid value for configuration {key}: Invalid rule: `{rule}`, unmatched substring: "
                f"`{rule[match.end() :]}`"
            )
        if match.group(2) is not None:
            parsed.append(KerberosRule(rule, default_realm, is_default=True))
            continue
        if not match.group(4):
            raise InvalidConfigError(
                f"Invalid value for configuration {key}: Invalid rule: {rule} (no component count)"
            )
        parsed.append(
            KerberosRule(
                rule,
                default_realm,
                components=int(match.group(4)),
                format=match.group(5),
                match=_compile(match.group(7), rule, key),
                from_pattern=_compile(match.group(9), rule, key),
                to_pattern=match.group(10) or "",
                repeat=match.group(11) == "g",
                to_lower=match.group(12) == "L",
                to_upper=match.group(12) == "U",
            )
        )
    return parsed


class KerberosShortNamer:
    """Maps authenticated Kerberos names to short names with the parsed rules (module docstring)."""

    def __init__(self, rules: Sequence[KerberosRule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def from_config(cls, rules: Iterable[str] | None, default_realm: str) -> KerberosShortNamer:
        return cls(parse_rules(list(rules) if rules else ["DEFAULT"], default_realm))

    def short_name(self, name: KerberosName) -> str:
        if name.host_name is None:
            if name.realm is None:
                return name.service_name
            params: tuple[str, ...] = (name.realm, name.service_name)
        else:
            params = (name.realm or "", name.service_name, name.host_name)
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        listed = "[" + ", ".join(str(r) for r in self.rules) + "]"
        raise NoMatchingRule(f"No rules apply to {name}, rules {listed}")


def default_realm() -> str:
    """The default realm of the Kerberos configuration (``[libdefaults] default_realm`` of
    ``KRB5_CONFIG`` or /etc/krb5.conf), as Kafka reads it from the JVM's; "" when none is set or
    MIT krb5 cannot be loaded. Reads files; call at start-up."""
    path = ctypes.util.find_library("krb5") or "libkrb5.so.3"
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return ""
    context = ctypes.c_void_p()
    if lib.krb5_init_context(ctypes.byref(context)) != 0:
        return ""
    try:
        realm = ctypes.c_char_p()
        if lib.krb5_get_default_realm(context, ctypes.byref(realm)) != 0 or realm.value is None:
            return ""
        value = realm.value.decode("utf-8", "replace")
        lib.krb5_free_default_realm(context, realm)
        return value
    finally:
        lib.krb5_free_context(context)

"""Principals: ``KafkaPrincipal``, the SSL subject as Java renders it, ``ssl.principal.mapping.rules``.

A principal is ``<type>:<name>`` (``User:alice``), compared by type and name (Kafka's
``KafkaPrincipal``). Kafka's ``DefaultKafkaPrincipalBuilder`` gives:

- PLAINTEXT: ``User:ANONYMOUS``;
- SSL: ``User:<mapped subject>``, the peer certificate's subject rendered as Java's
  ``X500Principal.getName()`` (RFC 2253: most specific RDN first, ``CN=alice,OU=eng,O=Acme,C=US``)
  and passed through :class:`SslPrincipalMapper`; ``User:ANONYMOUS`` when the client sent no
  certificate (``ssl.client.auth=requested`` or ``none``);
- SASL: ``User:<authorization id>`` of the mechanism.

Java's rendering, kept here exactly: only ``CN C L ST O OU STREET DC UID`` have keywords; any other
attribute is its dotted OID and ``#`` plus the lower-case hex of the value's DER encoding
(``1.2.840.113549.1.9.1=#16...`` for an e-mail address); the characters ``,=+<>#;"\\`` are escaped
with a backslash, NUL as ``\\00``, leading and trailing spaces with a backslash; a multi-valued RDN
joins its values with ``+`` in encoding order.

Mapping rules (Kafka's ``SslPrincipalMapper``): a comma-separated list of ``DEFAULT`` (the subject
unchanged) and ``RULE:<regex>/<replacement>/[L|U]`` (the first rule whose regex matches the whole
subject applies; ``$n`` in the replacement is group n, ``L``/``U`` lower/upper-cases the result).
Rules are Java regular expressions, run here by Python's ``re``: the common syntax is the same;
Java-only constructs such as ``\\p{Lower}`` are refused when the rules are parsed.
Pure functions and immutable objects; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.errors import InvalidConfigError

USER_TYPE = "User"
PRINCIPAL_MAPPING_RULES_CONFIG = "ssl.principal.mapping.rules"
DEFAULT_PRINCIPAL_MAPPING_RULES = "DEFAULT"


@dataclass(frozen=True, order=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str | None) -> KafkaPrincipal:
        """``<type>:<name>``, split at the first colon (Kafka's ``SecurityUtils.parseKafkaPrincipal``)."""
        if not text or ":" not in text:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        principal_type, _, name = text.partition(":")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = KafkaPrincipal(USER_TYPE, "*")


def sasl_principal(authorization_id: str) -> KafkaPrincipal:
    """The principal of a completed SASL exchange (PLAIN, SCRAM): ``User:<authorization id>``."""
    return KafkaPrincipal(USER_TYPE, authorization_id)


# --- the certificate subject, as java.security X500Principal.getName() renders it ---------------

_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java renders as text (DerValue.isDerString, non-canonical), with their charsets.
_STRING_TYPES = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # T61String
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPEES = ',=+<>#;"\\'


def _der_items(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """(tag, start of the whole TLV, start of contents, end) for each DER item in ``data[start:end]``."""
    pos, end = start, len(data) if end is None else end
    while pos < end:
        if pos + 2 > end:
            raise ValueError("truncated DER item in the certificate subject")
        tlv_start, tag = pos, data[pos]
        length = data[pos + 1]
        pos += 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4 or pos + count > end:
                raise ValueError("malformed DER length in the certificate subject")
            length = int.from_bytes(data[pos : pos + count], "big")
            pos += count
        if pos + length > end:
            raise ValueError("truncated DER item in the certificate subject")
        yield tag, tlv_start, pos, pos + length
        pos += length


def _oid(body: bytes) -> str:
    first = body[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in body[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _render_value(tag: int, contents: bytes) -> str:
    text = contents.decode(_STRING_TYPES[tag], errors="replace")
    escaped: list[str] = []
    for ch in text:
        if ch in _ESCAPEES:
            escaped.append("\\" + ch)
        elif ch == "\x00":
            escaped.append("\\00")
        else:
            escaped.append(ch)
    joined = "".join(escaped)
    lead = len(joined) - len(joined.lstrip(" \r"))
    trail = len(joined.rstrip(" \r"))
    if lead == len(joined):
        return "".join("\\" + c for c in joined)
    return "".join("\\" + c for c in joined[:lead]) + joined[lead:trail] + "".join("\\" + c for c in joined[trail:])


def distinguished_name(subject_der: bytes) -> str:
    """The RFC 2253 string Java's ``X500Principal.getName()`` gives for a DER-encoded ``Name``."""
    items = list(_der_items(subject_der))
    if len(items) != 1 or items[0][0] != 0x30:
        raise ValueError("a certificate subject is one DER SEQUENCE")
    _, _, body, end = items[0]
    rdns: list[str] = []
    for set_tag, _, set_start, set_end in _der_items(subject_der, body, end):
        if set_tag != 0x31:
            raise ValueError("a relative distinguished name is a DER SET")
        values: list[str] = []
        for _, _, atv_start, atv_end in _der_items(subject_der, set_start, set_end):
            (_oid_tag, _, oid_start, oid_end), (tag, tlv_start, value_start, value_end) = list(
                _der_items(subject_der, atv_start, atv_end)
            )[:2]
            oid = _oid(subject_der[oid_start:oid_end])
            keyword = _KEYWORDS.get(oid)
            if keyword is None or tag not in _STRING_TYPES:
                values.append(f"{keyword or oid}=#{subject_der[tlv_start:value_end].hex()}")
            else:
                values.append(f"{keyword}={_render_value(tag, subject_der[value_start:value_end])}")
        rdns.append("+".join(values))
    return ",".join(reversed(rdns))


def certificate_subject(certificate_der: bytes) -> str:
    """The subject of a DER certificate (``SSLObject.getpeercert(binary_form=True)``), as Java renders it."""
    from cryptography import x509

    return distinguished_name(x509.load_der_x509_certificate(certificate_der).subject.public_bytes())


# --- ssl.principal.mapping.rules -----------------------------------------------------------------

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    """No mapping rule applies to a subject (Kafka fails the connection)."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None
    replacement: str
    to_lower: bool
    to_upper: bool

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        groups = self.pattern.groups
        replacement = _escape_literal_back_references(self.replacement, groups)
        result = self.pattern.sub(lambda m: java_replacement(replacement, m), name)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        text = f"RULE:{self.pattern.pattern}/{self.replacement}"
        return text + ("/L" if self.to_lower else "/U" if self.to_upper else "")


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's rule: ``$n`` naming a group the pattern lacks is a literal ``$n`` (``$123`` with 12
    groups is group 12 then ``3``)."""
    if groups == 0:
        return replacement
    value = replacement
    pos = 0
    while (m := _BACK_REFERENCE.search(value, pos)) is not None:
        digits = m.group(1)
        pos = m.end()
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            value = value[: m.start()] + "\\" + value[m.start() :]
            pos = m.end() + 1
    return value


def java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Expand ``replacement`` as Java's ``Matcher.appendReplacement``: ``\\x`` is ``x``, ``$n`` is
    group n (digits taken while the number stays a valid group)."""
    out: list[str] = []
    i, groups = 0, match.re.groups
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number, i = int(replacement[i + 1]), i + 2
            while i < len(replacement) and replacement[i].isdigit() and number * 10 + int(replacement[i]) <= groups:
                number, i = number * 10 + int(replacement[i]), i + 1
            if number > groups:
                raise ValueError(f"No group {number}")
            out.append(match.group(number) or "")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed exactly as Kafka's ``SslPrincipalMapper``."""

    def __init__(self, rules: str | None = None) -> None:
        text = DEFAULT_PRINCIPAL_MAPPING_RULES if rules is None else rules
        self.rules = [r for r in (self._parse(text, rule) for rule in self._split(text)) if r is not None]

    @staticmethod
    def _split(text: str) -> list[str]:
        return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]

    @staticmethod
    def _parse(text: str, rule: str) -> _Rule | None:
        m = _RULE_PARSER.match(rule)
        if m is None or m.end() != len(rule):
            unmatched = rule[m.end() :] if m else rule
            raise _invalid(text, f"Invalid rule: `{rule}`, unmatched substring: `{unmatched}`")
        if m.group(1) is not None:
            return _Rule(None, "", False, False)
        if m.group(2) is None:
            return None  # empty rules are ignored
        try:
            pattern = re.compile(m.group(2))
        except re.error as e:
            raise _invalid(text, f"Invalid rule: {rule}: {e}") from None
        return _Rule(pattern, m.group(4), m.group(6) == "L", m.group(6) == "U")

    def name(self, distinguished_name: str) -> str:
        """The mapped name of a subject; :class:`NoMatchingRule` when no rule applies."""
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self}")

    def principal(self, certificate_der: bytes | None) -> KafkaPrincipal:
        """``User:<mapped subject>``, or ``User:ANONYMOUS`` when the peer sent no certificate."""
        if certificate_der is None:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name(certificate_subject(certificate_der)))

    def __str__(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"


def _invalid(rules: str, problem: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {rules!r} for configuration {PRINCIPAL_MAPPING_RULES_CONFIG}: {problem}")

"""Kafka's ``sasl.jaas.config`` syntax, parsed and never evaluated (Kafka's ``JaasConfig``).

Format: one or more entries ``<login module class> <flag> (<option>=<value>)* ;`` where the flag is
``required``, ``requisite``, ``sufficient`` or ``optional`` (any case), e.g.::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

Tokens follow Java's ``StreamTokenizer`` as Kafka configures it: bytes up to space are blanks;
words run over any other character except ``;``, ``=``, quotes and ``/``; values may be quoted
with ``"`` or ``'`` and then hold any character up to the closing quote or the end of the line,
with Java's escapes (``\\n \\t \\r \\b \\f \\a \\v``, octal ``\\0``-``\\377``, and ``\\x`` for any
other ``x``); ``//`` and ``/* */`` and a lone ``/`` start comments. A repeated option keeps its
last value. Errors raise :class:`~odradek.errors.InvalidConfigError` with Kafka's message and the
key named. Pure; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.errors import InvalidConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")

_EOF = "EOF"
_WORD = "WORD"
_QUOTED = "QUOTED"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class LoginModuleEntry:
    login_module: str
    control_flag: str
    """Upper case: REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL."""
    options: dict[str, str] = field(default_factory=dict)


def _is_word_char(ch: str) -> bool:
    code = ord(ch)
    return (32 < code <= 128 or code >= 160) and ch not in ";=\"'/"


class _Tokenizer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def next(self) -> tuple[str, str | None]:
        """(kind, value): kind is _EOF, _WORD, _QUOTED or the ordinary character itself."""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ord(ch) <= 32:
                self.pos += 1
            elif ch == "/":
                if text.startswith("//", self.pos) or not text.startswith("/*", self.pos):
                    end = min((i for i in (text.find("\n", self.pos), text.find("\r", self.pos)) if i >= 0), default=-1)
                    self.pos = len(text) if end < 0 else end
                else:
                    end = text.find("*/", self.pos + 2)
                    self.pos = len(text) if end < 0 else end + 2
            else:
                break
        if self.pos >= len(text):
            return _EOF, None
        ch = text[self.pos]
        if ch in "\"'":
            return _QUOTED, self._quoted(ch)
        if _is_word_char(ch):
            start = self.pos
            while self.pos < len(text) and _is_word_char(text[self.pos]):
                self.pos += 1
            return _WORD, text[start : self.pos]
        self.pos += 1
        return ch, None

    def _quoted(self, quote: str) -> str:
        text, out = self.text, []
        self.pos += 1
        while self.pos < len(text) and text[self.pos] not in (quote, "\n", "\r"):
            ch = text[self.pos]
            self.pos += 1
            if ch != "\\":
                out.append(ch)
                continue
            nxt = text[self.pos] if self.pos < len(text) else ""
            self.pos += 1 if nxt else 0
            if "0" <= nxt <= "7":
                value, digits = int(nxt), 1
                limit = 3 if nxt <= "3" else 2
                while digits < limit and self.pos < len(text) and "0" <= text[self.pos] <= "7":
                    value = value * 8 + int(text[self.pos])
                    self.pos += 1
                    digits += 1
                out.append(chr(value))
            else:
                out.append(_ESCAPES.get(nxt, nxt))
        if self.pos < len(text) and text[self.pos] == quote:
            self.pos += 1
        return "".join(out)


def parse_jaas_config(text: str, *, key: str = "sasl.jaas.config") -> list[LoginModuleEntry]:
    """Every entry of a JAAS config string; :class:`InvalidConfigError` naming ``key`` when malformed."""

    def fail(problem: str) -> InvalidConfigError:
        return InvalidConfigError(f"Invalid value for configuration {key}: {problem}")

    tokens = _Tokenizer(text)
    entries: list[LoginModuleEntry] = []
    kind, value = tokens.next()
    while kind != _EOF:
        if not value:
            raise fail("Invalid empty LoginModule name")
        login_module = value
        kind, flag = tokens.next()
        if kind == _EOF:
            raise fail("Login module control flag not specified in JAAS config")
        if flag is None:
            raise fail("Login module control flag is not available in the JAAS config")
        if flag.upper() not in CONTROL_FLAGS:
            raise fail(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        kind, option = tokens.next()
        while kind not in (_EOF, ";"):
            separator, _ = tokens.next()
            value_kind, option_value = tokens.next() if separator == "=" else (_EOF, None)
            if value_kind == _EOF or option_value is None:
                raise fail(f"Value not specified for key '{option}' in JAAS config")
            options[str(option)] = option_value
            kind, option = tokens.next()
        if kind != ";":
            raise fail("JAAS config entry not terminated by semi-colon")
        entries.append(LoginModuleEntry(login_module, flag.upper(), options))
        kind, value = tokens.next()
    if not entries:
        raise fail("Login module not specified in JAAS config")
    return entries


def parse_single_login_module(
    text: str, *, key: str = "sasl.jaas.config", expected_module: str | None = None
) -> LoginModuleEntry:
    """The one entry Kafka allows in ``sasl.jaas.config`` (``JaasContext.load``); with
    ``expected_module`` the entry must name that login module class."""
    entries = parse_jaas_config(text, key=key)
    if len(entries) != 1:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: JAAS config property contains {len(entries)} "
            "login modules, should be 1 module"
        )
    entry = entries[0]
    if expected_module is not None and entry.login_module != expected_module:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: login module {entry.login_module} given, "
            f"{expected_module} expected"
        )
    return entry


def plain_users(entry: LoginModuleEntry) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a PlainLoginModule entry, by user name."""
    return {k[len("user_") :]: v for k, v in entry.options.items() if k.startswith("user_")}

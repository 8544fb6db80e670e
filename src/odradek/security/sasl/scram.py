"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them.

Exchange (``ScramSaslServer`` / ``ScramSaslClient``)::

    client-first  n,[a=<authzid>],n=<saslname>,r=<client nonce>[,<ext>=<value>...]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 gs2 header, "biws" for "n,,">,r=<nonce>[,...],p=<base64 proof>
    server-final  v=<base64 server signature>        (a client also understands e=<error>)

Only the gs2 header ``n`` (no channel binding) is accepted. ``saslname`` escapes ``=`` as ``=3D`` and
``,`` as ``=2C``. With the extension ``tokenauth=true`` (delegation tokens, KIP-48) the user name is
a token id: the credential is the token's (its base64 HMAC as the password), the authorization id
is the token's owner and :attr:`ScramSaslServer.token_authenticated` is set; an unknown token fails
with ``Token Authentication failed: Invalid tokenId : <id>``. Other extensions are ignored.
The server checks, in Kafka's order and with Kafka's messages: the client-first syntax, a
stored credential for the user (iterations at least the mechanism's 4096), the authzid (empty or the
user name; the only failure shown to the client), then in the final message the nonce (as Kafka
3.9 does: it must *end with* the combined nonce of the server-first message, so that librdkafka
before 2.6.1, which repeats its client nonce in front of it, still logs in; Kafka 4.0 went back to
strict equality), the channel binding (base64 of the client's gs2 header; Kafka does not check
it) and the proof, compared in constant time. A failed server answers nothing more (Kafka sends
no ``e=`` message; the SaslAuthenticate response carries the error). Auth messages are built from
the messages as received (RFC 5802), which for Kafka's clients is what Kafka rebuilds.

Credentials (``ScramCredentialUtils``): ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
with Java's standard base64, the form stored under ``/config/users/<user>``. Kafka's salts and nonces
are 130 random bits written in base 36 (the salt is that text's bytes). Single-threaded per
connection; no I/O (PBKDF2 at 4096 iterations costs about a millisecond per exchange).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from odradek.security.sasl import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    IllegalSaslStateError,
    SaslAuthenticationError,
    not_completed,
)

TOKEN_AUTH = "tokenauth"
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class TokenLogin:
    """What a SCRAM server needs of a delegation token: the owner's name (the authorization id),
    its expiry (epoch ms; bounds the session, KIP-368) and the mechanism's credential."""

    owner: str
    expiry_timestamp_ms: int
    credential: ScramCredential | None


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802's ``Hi(Normalize(password), salt, i)``: PBKDF2-HMAC; Kafka normalizes to UTF-8 only."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


MECHANISMS = {
    SCRAM_SHA_256: ScramMechanism(SCRAM_SHA_256, "sha256"),
    SCRAM_SHA_512: ScramMechanism(SCRAM_SHA_512, "sha512"),
}


def mechanism(name: str) -> ScramMechanism:
    try:
        return MECHANISMS[name]
    except KeyError:
        supported = ", ".join(MECHANISMS)
        raise ValueError(
            f"Requested mechanism '{name}' is not supported. Supported mechanisms are '{supported}'."
        ) from None


def secure_random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: 130 random bits in base 36."""
    value, digits = secrets.randbits(130), []
    while True:
        value, rest = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[rest])
        if value == 0:
            return "".join(reversed(digits))


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username(saslname: str) -> str:
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


# --- credentials -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        """``salt=...,stored_key=...,server_key=...,iterations=...`` (``credentialToString``)."""
        b64 = _b64encode
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """The inverse of :meth:`to_string`; ``ValueError("Credentials not valid: ...")`` otherwise."""
        props: dict[str, str] = {}
        tokens = text.split(",")
        while len(tokens) > 1 and tokens[-1] == "":
            tokens.pop()  # Java's String.split drops trailing empty strings
        for token in tokens:
            index = token.find("=")
            if index <= 0:
                raise ValueError(f"Credentials not valid: {text}")
            props[token[:index]] = token[index + 1 :]
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        try:
            return cls(
                _b64decode(props["salt"]),
                _b64decode(props["stored_key"]),
                _b64decode(props["server_key"]),
                int(props["iterations"]),
            )
        except ValueError:
            raise ValueError(f"Credentials not valid: {text}") from None


def generate_credential(
    mechanism_name: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential (``ScramFormatter.generateCredential``); iterations below the mechanism's
    minimum raise ``ValueError`` with kafka-configs' message."""
    mech = mechanism(mechanism_name)
    if iterations < mech.min_iterations:
        raise ValueError(
            f"Iterations {iterations} is less than the minimum {mech.min_iterations} required for {mech.name}"
        )
    salt = secure_random_string().encode() if salt is None else salt
    return credential_from_salted_password(
        mech.name, salt, mech.salted_password(password, salt, iterations), iterations
    )


def credential_from_salted_password(
    mechanism_name: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password (``ScramFormatter.generateCredential(salt, saltedPassword,
    iterations)``), as AlterUserScramCredentials' upsertions carry it."""
    mech = mechanism(mechanism_name)
    return ScramCredential(
        salt, mech.hash(mech.client_key(salted_password)), mech.server_key(salted_password), iterations
    )


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64decode(text: str) -> bytes:
    """Java's basic decoder: the standard alphabet, padding optional."""
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        raise ValueError("not base64")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


# --- messages (Kafka's ScramMessages patterns) --------------------------------------------------

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})"
)
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_B64})){_EXTENSIONS}")


def _parse(
    pattern: re.Pattern[str], message: bytes, what: str, fail: Callable[[str], SaslAuthenticationError]
) -> tuple[str, re.Match[str]]:
    """The message as text and its match; ``fail("Invalid SCRAM <what> message format: ...")`` else."""
    text = message.decode("utf-8", errors="replace")
    m = pattern.fullmatch(text)
    if m is None:
        raise fail(f"Invalid SCRAM {what} message format: {text}")
    return text, m


def _extensions(text: str) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in text.split(",") if item)
    return {k: v for k, v in pairs}


class _ServerState(Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class ScramSaslServer:
    """The broker's side. ``credentials`` looks a user's credential up (``None``: no such user)."""

    def __init__(
        self,
        mechanism_name: str,
        credentials: Callable[[str], ScramCredential | None] | Mapping[str, ScramCredential],
        *,
        nonce: Callable[[], str] = secure_random_string,
        tokens: Callable[[str], TokenLogin | None] | None = None,
    ) -> None:
        self._mech = mechanism(mechanism_name)
        self.mechanism = self._mech.name
        self._lookup = credentials.get if isinstance(credentials, Mapping) else credentials
        self._tokens = tokens
        self.token_authenticated = False
        self.credential_lifetime_ms: int | None = None
        """A token's expiry timestamp (epoch ms) once a token logged in: the session ends there."""
        self._nonce = nonce
        self._state = _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE
        self._authorization_id: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_full = ""

    @property
    def state(self) -> str:
        return self._state.value

    @property
    def complete(self) -> bool:
        return self._state is _ServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        if self._state is not _ServerState.COMPLETE or self._authorization_id is None:
            raise not_completed(self.mechanism)
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._state is _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._client_first(response)
            if self._state is _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._client_final(response)
            raise IllegalSaslStateError(
                f"Unexpected challenge in Sasl server state {self._state.value}", mechanism=self.mechanism
            )
        except SaslAuthenticationError:
            self._credential = None
            self._state = _ServerState.FAILED
            raise

    def _fail(self, message: str, *, public: bool = False) -> SaslAuthenticationError:
        return SaslAuthenticationError(message, mechanism=self.mechanism, public=public)

    def _client_first(self, response: bytes) -> bytes:
        _, m = _parse(_CLIENT_FIRST, response, "client first", self._fail)
        try:
            user = username(m["saslname"])
        except ValueError:
            raise self._fail("Authentication failed: Credentials could not be obtained") from None
        authorization_id = user
        if _extensions(m["extensions"]).get(TOKEN_AUTH, "").lower() == "true":
            token = self._tokens(user) if self._tokens is not None else None
            if token is None:
                raise self._fail(f"Token Authentication failed: Invalid tokenId : {user}")
            authorization_id, credential = token.owner, token.credential
            self.token_authenticated = True
            self.credential_lifetime_ms = token.expiry_timestamp_ms
        else:
            credential = self._lookup(user)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = m["authzid"] or ""
        if authzid and authzid != user:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username",
                public=True,
            )
        if credential.iterations < self._mech.min_iterations:
            raise self._fail(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._mech.min_iterations} for {self.mechanism}"
            )
        self._authorization_id = authorization_id
        self._credential = credential
        self._gs2_header = m["gs2"]
        self._client_first_bare = m["bare"]
        self._nonce_full = m["nonce"] + self._nonce()
        self._server_first = f"r={self._nonce_full},s={_b64encode(credential.salt)},i={credential.iterations}"
        self._state = _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._server_first.encode()

    def _client_final(self, response: bytes) -> bytes:
        _, m = _parse(_CLIENT_FINAL, response, "client final", self._fail)
        if not m["nonce"].endswith(self._nonce_full):
            # Kafka 3.7.2/3.8.1/3.9.x: librdkafka before 2.6.1 sends its client nonce again in
            # front of the combined nonce; Kafka 4.0 requires the combined nonce exactly
            raise self._fail("Invalid client nonce in the final client message.")
        if m["channel"] != _b64encode(self._gs2_header.encode()):
            raise self._fail("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = self._mech.hmac(credential.stored_key, auth_message)
        proof = _b64decode(m["proof"])
        if len(proof) != len(client_signature):
            raise self._fail("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof))
        if not hmac.compare_digest(self._mech.hash(client_key), credential.stored_key):
            raise self._fail("Invalid client credentials")
        signature = self._mech.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = _ServerState.COMPLETE
        return f"v={_b64encode(signature)}".encode()


class _ClientState(Enum):
    SEND_CLIENT_FIRST_MESSAGE = "SEND_CLIENT_FIRST_MESSAGE"
    RECEIVE_SERVER_FIRST_MESSAGE = "RECEIVE_SERVER_FIRST_MESSAGE"
    RECEIVE_SERVER_FINAL_MESSAGE = "RECEIVE_SERVER_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class ScramSaslClient:
    """The client's side (odradek's client and the broker's inter-broker connections).

    Fed the empty challenge first (its answer is the client-first message), then the server-first
    and server-final messages; the last answer is ``None``.
    """

    def __init__(
        self,
        mechanism_name: str,
        user: str,
        password: str,
        *,
        extensions: Mapping[str, str] | None = None,
        nonce: Callable[[], str] = secure_random_string,
    ) -> None:
        self._mech = mechanism(mechanism_name)
        self.mechanism = self._mech.name
        self._user = user
        self._password = password
        self._extensions = dict(extensions or {})
        self._nonce = nonce
        self._state = _ClientState.SEND_CLIENT_FIRST_MESSAGE
        self._client_nonce = ""
        self._client_first_bare = ""
        self._salted_password = b""
        self._auth_message = b""

    @property
    def state(self) -> str:
        return self._state.value

    @property
    def complete(self) -> bool:
        return self._state is _ClientState.COMPLETE

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        try:
            if self._state is _ClientState.SEND_CLIENT_FIRST_MESSAGE:
                return self._client_first(challenge)
            if self._state is _ClientState.RECEIVE_SERVER_FIRST_MESSAGE:
                return self._client_final(challenge)
            if self._state is _ClientState.RECEIVE_SERVER_FINAL_MESSAGE:
                self._server_final(challenge)
                return None
            raise IllegalSaslStateError(
                f"Unexpected challenge in Sasl client state {self._state.value}", mechanism=self.mechanism
            )
        except SaslAuthenticationError:
            self._state = _ClientState.FAILED
            raise

    def _fail(self, message: str) -> SaslAuthenticationError:
        return SaslAuthenticationError(message, mechanism=self.mechanism, public=True)

    def _client_first(self, challenge: bytes) -> bytes:
        if challenge:
            raise self._fail("Expected empty challenge")
        self._client_nonce = self._nonce()
        extensions = "".join(f",{k}={v}" for k, v in self._extensions.items())
        self._client_first_bare = f"n={sasl_name(self._user)},r={self._client_nonce}{extensions}"
        self._state = _ClientState.RECEIVE_SERVER_FIRST_MESSAGE
        return f"n,,{self._client_first_bare}".encode()

    def _client_final(self, challenge: bytes) -> bytes:
        text, m = _parse(_SERVER_FIRST, challenge, "server first", self._fail)
        iterations = int(m["iterations"])
        if iterations <= 0:
            raise self._fail(f"Invalid SCRAM server first message format: invalid iterations {iterations}")
        if not m["nonce"].startswith(self._client_nonce):
            raise self._fail("Invalid server nonce: does not start with client nonce")
        if iterations < self._mech.min_iterations:
            raise self._fail(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self._mech.min_iterations} for {self.mechanism}"
            )
        self._salted_password = self._mech.salted_password(self._password, _b64decode(m["salt"]), iterations)
        without_proof = f"c={_b64encode(b'n,,')},r={m['nonce']}"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = self._mech.client_key(self._salted_password)
        signature = self._mech.hmac(self._mech.hash(client_key), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._state = _ClientState.RECEIVE_SERVER_FINAL_MESSAGE
        return f"{without_proof},p={_b64encode(proof)}".encode()

    def _server_final(self, challenge: bytes) -> None:
        _, m = _parse(_SERVER_FINAL, challenge, "server final", self._fail)
        if m["error"] is not None:
            raise self._fail(f"Sasl authentication using {self.mechanism} failed with error: {m['error']}")
        expected = self._mech.hmac(self._mech.server_key(self._salted_password), self._auth_message)
        if not hmac.compare_digest(_b64decode(m["signature"]), expected):
            raise self._fail("Invalid server signature in server final message")
        self._state = _ClientState.COMPLETE

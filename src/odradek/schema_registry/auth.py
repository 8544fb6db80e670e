"""HTTP Basic authentication checked against the cluster's SCRAM credentials, and the writers list.

A request's ``Authorization: Basic`` user and password are verified by a SCRAM login with them
against a broker of the cluster (the mechanism of the registry's own Kafka client when it is a
SCRAM one, else SCRAM-SHA-256): the broker checks them against the credentials it keeps in
ZooKeeper (``/config/users``), so the registry holds no password store of its own. A successful
login is remembered for ``cache_ms`` under the user and a SHA-256 of the password, so a serializer
sending a request per record costs one login per minute, not one per request; failures are not
remembered. Missing or wrong credentials are 401 (error_code 40101) with
``WWW-Authenticate: Basic realm="SchemaRegistry"``. The principal is ``User:<name>``; writes need
it (or the bare name) in ``schema.registry.writers``, others get 403 (error_code 40301).

Threading: the registry's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from collections.abc import Iterable
from dataclasses import replace

from starlette.requests import Request

from odradek.client.cluster import Cluster
from odradek.client.errors import KafkaAuthenticationError
from odradek.client.security import ClientSecurity
from odradek.errors import KafkaError
from odradek.schema_registry import errors as e
from odradek.schema_registry.api import Authenticator

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def basic_credentials(header: str | None) -> tuple[str, str]:
    """User and password of an ``Authorization: Basic`` header; 401 when absent or malformed."""
    if not header or not header.lower().startswith("basic "):
        raise e.Unauthorized("Unauthorized: credentials are required (HTTP Basic)")
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise e.Unauthorized("Unauthorized: malformed Basic credentials") from None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        raise e.Unauthorized("Unauthorized: malformed Basic credentials")
    return user, password


class ScramLoginAuthenticator(Authenticator):
    """Verifies Basic credentials by a SCRAM login against ``bootstrap_servers``."""

    def __init__(
        self,
        bootstrap_servers: str,
        security: ClientSecurity,
        writers: Iterable[str],
        *,
        cache_ms: int = 60000,
        timeout_ms: int = 5000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        mechanism = security.sasl_mechanism if security.sasl_mechanism in SCRAM_MECHANISMS else "SCRAM-SHA-256"
        protocol = security.security_protocol if security.uses_sasl else "SASL_PLAINTEXT"
        self.security = replace(security, security_protocol=protocol, sasl_mechanism=mechanism)
        self.writers = {w.strip() for w in writers if w.strip()}
        self.cache_ms = cache_ms
        self.timeout_ms = timeout_ms
        self._verified: dict[tuple[str, bytes], float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def principal(self, request: Request) -> str:
        user, password = basic_credentials(request.headers.get("authorization"))
        key = (user, hashlib.sha256(password.encode()).digest())
        now = time.monotonic()
        if self._verified.get(key, 0.0) > now:
            return f"User:{user}"
        lock = self._locks.setdefault(user, asyncio.Lock())
        async with lock:
            if self._verified.get(key, 0.0) <= time.monotonic():
                await self._login(user, password)
                if len(self._verified) > 10000:
                    self._verified.clear()
                self._verified[key] = time.monotonic() + self.cache_ms / 1000
        return f"User:{user}"

    async def _login(self, user: str, password: str) -> None:
        security = replace(self.security, sasl_username=user, sasl_password=password)
        cluster = Cluster(
            self.bootstrap_servers,
            client_id="odradek-schema-registry-auth",
            request_timeout_ms=self.timeout_ms,
            connect_timeout_ms=self.timeout_ms,
            retries=0,
            security=security,
        )
        try:
            await cluster.any_connection()
        except KafkaAuthenticationError:
            raise e.Unauthorized("Unauthorized: authentication failed") from None
        except KafkaError as exc:
            raise e.StoreError(f"Cannot verify credentials with the cluster: {exc}") from None
        finally:
            await cluster.close()

    def may_write(self, principal: str) -> bool:
        return principal in self.writers or principal.removeprefix("User:") in self.writers

"""Hosting the registry: a uvicorn server on its own thread and event loop.

:class:`RegistryServer` starts, on a new thread with a new event loop, the ``_schemas`` store,
the leader election, the REST app and a uvicorn server on a socket it binds itself (so port 0
works and :attr:`RegistryServer.url` is known once :meth:`start` returns). The broker and
``odradek schema-registry`` both use it; neither shares its loop with the registry, so a slow
request never stalls the broker's request loop. :meth:`stop` asks uvicorn to exit, closes the
store and ZooKeeper session and joins the thread.

Config keys (``schema.registry.*``, read by :meth:`RegistryConfig.from_properties`):
``schema.registry.listener`` (``http://HOST:PORT`` or ``https://HOST:PORT``),
``schema.registry.ssl.certificate.location`` / ``schema.registry.ssl.key.location`` (PEM files,
required for https), ``schema.registry.authentication.method`` (``NONE`` or ``BASIC``; default
BASIC when the registry's Kafka client uses SASL), ``schema.registry.writers`` (comma-separated
principals), ``schema.registry.max.request.bytes``, ``schema.registry.topic``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import uvicorn

from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.schema_registry.api import Authenticator, Context, build_app
from odradek.schema_registry.kafka_store import SCHEMAS_TOPIC, KafkaStore
from odradek.schema_registry.leader import LeaderElector
from odradek.schema_registry.registry import SchemaRegistry

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 10 * 1024 * 1024


class RegistryConfigError(ValueError):
    """A ``schema.registry.*`` value that cannot be used; the message names the key."""


@dataclass(slots=True)
class RegistryConfig:
    bootstrap_servers: str
    listener: str
    zookeeper_connect: str | None = None
    security: ClientSecurity = PLAINTEXT_SECURITY
    certfile: str | None = None
    keyfile: str | None = None
    authentication: str = "NONE"
    writers: tuple[str, ...] = ()
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    topic: str = SCHEMAS_TOPIC
    zookeeper_session_timeout_ms: int = 6000
    wait_for_brokers: int = 1
    auth_bootstrap_servers: str | None = None
    """Where Basic credentials are checked by a SCRAM login (default: ``bootstrap_servers``), with
    ``auth_security``'s protocol and TLS settings: a broker whose inter-broker listener is not SASL
    points it at one of its SASL listeners."""
    auth_security: ClientSecurity | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, Any],
        *,
        bootstrap_servers: str,
        listener: str | None = None,
        zookeeper_connect: str | None = None,
        security: ClientSecurity = PLAINTEXT_SECURITY,
        auth_target: tuple[str, ClientSecurity] | None = None,
    ) -> RegistryConfig:
        def get(key: str, default: str | None = None) -> str | None:
            value = props.get(key, default)
            return None if value is None else str(value).strip()

        url = listener or get("schema.registry.listener")
        if not url:
            raise RegistryConfigError("schema.registry.listener is required (http://HOST:PORT)")
        if "://" not in url:
            url = "http://" + url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.port is None:
            raise RegistryConfigError(
                f"Invalid value {url} for configuration schema.registry.listener: http(s)://HOST:PORT"
            )
        certfile = get("schema.registry.ssl.certificate.location")
        keyfile = get("schema.registry.ssl.key.location")
        if parts.scheme == "https" and not certfile:
            raise RegistryConfigError(
                "an https schema.registry.listener needs schema.registry.ssl.certificate.location"
            )
        sasl = security.uses_sasl or auth_target is not None
        method = (get("schema.registry.authentication.method") or ("BASIC" if sasl else "NONE")).upper()
        if method not in ("NONE", "BASIC"):
            raise RegistryConfigError(f"Invalid value {method} for configuration schema.registry.authentication.method")
        try:
            limit = int(get("schema.registry.max.request.bytes") or DEFAULT_MAX_REQUEST_BYTES)
        except ValueError:
            raise RegistryConfigError("schema.registry.max.request.bytes must be an integer") from None
        writers = tuple(w.strip() for w in (get("schema.registry.writers") or "").split(",") if w.strip())
        result = cls(
            bootstrap_servers,
            url,
            zookeeper_connect,
            security,
            certfile,
            keyfile,
            method,
            writers,
            limit,
            get("schema.registry.topic") or SCHEMAS_TOPIC,
        )
        if auth_target is not None:
            result.auth_bootstrap_servers, result.auth_security = auth_target
        return result


class RegistryServer:
    """The registry on its own thread; ``start()`` returns once it serves, ``stop()`` ends it."""

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self.url = config.listener
        self.loop: asyncio.AbstractEventLoop | None = None
        self.registry: SchemaRegistry | None = None
        self.leader: LeaderElector | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def _bind(self) -> socket.socket:
        parts = urlsplit(self.config.listener)
        host = parts.hostname or "0.0.0.0"
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it a response written in two parts waits for a delayed ACK (40 ms)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, parts.port or 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        shown = host if host not in ("0.0.0.0", "::", "") else socket.gethostname()
        self.url = f"{parts.scheme}://{shown}:{port}"
        return sock

    def _forwarding_trust(self) -> ssl.SSLContext:
        """How writes forwarded to an https leader verify it: the system's CAs plus the
        certificates of this instance's own chain file (instances of one cluster share a CA)."""
        context = ssl.create_default_context()
        if self.config.certfile:
            with contextlib.suppress(ssl.SSLError, OSError):
                context.load_verify_locations(cafile=self.config.certfile)
        return context

    def start(self, timeout_s: float = 60.0) -> RegistryServer:
        sock = self._bind()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(sock, ready), name="schema-registry", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, sock: socket.socket, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._serve(sock, ready))
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)  # start() raises it to its caller
            else:
                log.exception("the schema registry stopped")
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            sock.close()
            self._done.set_result(None)

    async def _serve(self, sock: socket.socket, ready: concurrent.futures.Future[None]) -> None:
        cfg = self.config
        store = KafkaStore(
            cfg.bootstrap_servers, topic=cfg.topic, security=cfg.security, wait_for_brokers=cfg.wait_for_brokers
        )
        zk = None
        warm_up: asyncio.Future[None] | None = None
        client = httpx.AsyncClient(timeout=10.0, verify=self._forwarding_trust())
        try:
            await store.start()
            if cfg.zookeeper_connect:
                from odradek.metadata.zookeeper import ZooKeeperStore

                zk = ZooKeeperStore(cfg.zookeeper_connect, session_timeout_ms=cfg.zookeeper_session_timeout_ms)
                await zk.start()
            self.registry = SchemaRegistry(store, cfg.max_request_bytes)
            warm_up = asyncio.ensure_future(self.registry.warm_up())
            warm_up.add_done_callback(lambda f: f.cancelled() or f.exception())
            self.leader = LeaderElector(self.url, zk, on_elected=store.sync)
            await self.leader.start()
            authenticator: Authenticator | None = None
            if cfg.authentication == "BASIC":
                from odradek.schema_registry.auth import ScramLoginAuthenticator

                authenticator = ScramLoginAuthenticator(
                    cfg.auth_bootstrap_servers or cfg.bootstrap_servers, cfg.auth_security or cfg.security, cfg.writers
                )
            app = build_app(Context(self.registry, self.leader, authenticator, cfg.max_request_bytes, client))
            https = urlsplit(cfg.listener).scheme == "https"
            config = uvicorn.Config(
                app,
                log_level="warning",
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=2,
                ssl_certfile=cfg.certfile if https else None,
                ssl_keyfile=cfg.keyfile if https else None,
            )
            server = uvicorn.Server(config)
            self._server = server
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            if serving.done():
                serving.result()
            ready.set_result(None)
            await serving
        finally:
            if warm_up is not None:
                warm_up.cancel()
            if self.leader is not None:
                await self.leader.close()
            if zk is not None:
                with contextlib.suppress(Exception):
                    await zk.close()
            await store.close()
            await client.aclose()

    def stop(self, timeout_s: float = 10.0) -> None:
        server, loop = self._server, self.loop
        if server is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(setattr, server, "should_exit", True)
        if self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(concurrent.futures.TimeoutError):
                self._done.result(timeout_s)

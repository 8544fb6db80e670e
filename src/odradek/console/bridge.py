"""The console's link to the cluster: odradek's asyncio client on a loop of its own (:class:`ClientLoop`).

The web server's event loop (uvicorn's) never runs a Kafka request itself: every cluster call is a
coroutine submitted to :class:`ClientLoop`, a daemon thread running its own event loop, and awaited
from the web loop through ``asyncio.wrap_future``. A slow broker, a ZooKeeper round trip or a
decoding burst therefore never stalls the serving of other pages, and each call is bounded by a
timeout (``timeout_s``, default :data:`CALL_TIMEOUT_S`): on expiry the coroutine is cancelled on
the client loop and the page answers with the timeout.

Connections are pooled per identity: :meth:`ClientLoop.admin` returns the :class:`AdminClient`
of one ``ClientSecurity`` (the console's own, or a signed-in user's SCRAM login), created on the
client loop on first use and kept until :meth:`ClientLoop.forget` (sign-out) or :meth:`close`;
:meth:`ClientLoop.guarded_admin` the one acting for a principal named by an authenticating proxy
(:mod:`odradek.console.guard`), one per principal.

Thread rules: ``submit``/``call`` may be called from any thread or loop; the coroutine factories
they receive run on the client loop and may use only objects of that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from odradek.client.admin import AdminClient
from odradek.client.security import ClientSecurity
from odradek.console.guard import AclGuard, GuardedAdmin
from odradek.security.principal import KafkaPrincipal

__all__ = ["CALL_TIMEOUT_S", "ClientLoop"]

T = TypeVar("T")

CALL_TIMEOUT_S = 15.0
"""The longest a page waits for the cluster before answering with a timeout."""


class ClientLoop:
    """A daemon thread with an event loop hosting the console's Kafka clients."""

    def __init__(self, bootstrap_servers: str, *, request_timeout_ms: int = 10000) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.request_timeout_ms = request_timeout_ms
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="odradek-console-client", daemon=True)
        self._admins: dict[ClientSecurity, AdminClient] = {}
        self._guarded: dict[tuple[ClientSecurity, KafkaPrincipal], GuardedAdmin] = {}
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:  # stopped by close(): the loop's own sockets (its self-pipe) are closed here
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has stopped the thread and closed its event loop."""
        return self._loop.is_closed()

    def submit(
        self, factory: Callable[[], Awaitable[T]], timeout_s: float = CALL_TIMEOUT_S
    ) -> concurrent.futures.Future[T]:
        """Run ``factory()`` on the client loop, cancelled after ``timeout_s`` (TimeoutError)."""

        async def bounded() -> T:
            return await asyncio.wait_for(factory(), timeout_s)

        return asyncio.run_coroutine_threadsafe(bounded(), self._loop)

    async def call(self, factory: Callable[[], Awaitable[T]], timeout_s: float = CALL_TIMEOUT_S) -> T:
        """Await ``factory()`` run on the client loop, from another event loop."""
        return await asyncio.wrap_future(self.submit(factory, timeout_s))

    def run_sync(self, factory: Callable[[], Awaitable[T]], timeout_s: float = CALL_TIMEOUT_S) -> T:
        """Block the calling thread (never the client loop's) until ``factory()`` is done."""
        return self.submit(factory, timeout_s).result(timeout_s + 1)

    def _client_options(self, security: ClientSecurity) -> dict[str, Any]:
        """The console's admin clients' options besides the bootstrap servers (plain or guarded)."""
        return {
            "client_id": "odradek-console",
            "request_timeout_ms": self.request_timeout_ms,
            "connect_timeout_ms": min(self.request_timeout_ms, 5000),
            "retries": 2,
            "security": security,
        }

    def admin(self, security: ClientSecurity) -> AdminClient:
        """The admin client of ``security``; call on the client loop only."""
        admin = self._admins.get(security)
        if admin is None:
            admin = AdminClient(self.bootstrap_servers, **self._client_options(security))
            self._admins[security] = admin
        return admin

    def guarded_admin(self, security: ClientSecurity, guard: AclGuard) -> GuardedAdmin:
        """The admin client acting for ``guard.principal`` over ``security``; client loop only."""
        key = (security, guard.principal)
        admin = self._guarded.get(key)
        if admin is None:
            admin = GuardedAdmin(guard, self.bootstrap_servers, **self._client_options(security))
            self._guarded[key] = admin
        return admin

    async def forget(self, security: ClientSecurity) -> None:
        """Close and drop the admin client of ``security`` (from any loop)."""

        async def close() -> None:
            admin = self._admins.pop(security, None)
            if admin is not None:
                await admin.close()

        await self.call(close)

    def close(self) -> None:
        """Close every client and stop the thread (from any thread but the client loop's)."""

        async def close_all() -> None:
            admins: list[AdminClient] = [*self._admins.values(), *self._guarded.values()]
            self._admins, self._guarded = {}, {}
            for admin in admins:
                await admin.close()

        try:
            self.submit(close_all, 5).result(6)
        except Exception:  # closing is best effort: the thread is a daemon
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

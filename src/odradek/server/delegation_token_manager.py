"""The broker's delegation tokens (Kafka 3.9's ``DelegationTokenManagerZk``).

With ``delegation.token.secret.key`` (or its alias ``delegation.token.master.key``) set, start-up
creates ``/delegation_token/{tokens,token_changes}``, loads every token into the
:class:`~odradek.security.delegation_token.TokenCache` (each token's HMAC made again from its id
and the secret, and from it the SCRAM credentials a client logs in with), follows
``/delegation_token/token_changes`` so that a token created, renewed or expired through any broker
of the cluster is known here at once, and every ``delegation.token.expiry.check.interval.ms``
removes the tokens past their expiry or max timestamp (on every broker, as Kafka schedules
``delete-expired-tokens``: the znode, the cache entry and a notification). Without a secret every
operation answers DELEGATION_TOKEN_AUTH_DISABLED and nothing is read or written.

Each operation (create, renew, expire, the sweep, a notification) runs under one lock, as Kafka's
``lock.synchronized``: the token znode is written first, then the cache, then the notification.
The same layout works on the embedded store (one process) and on ZooKeeper.

Loop-only: every method runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from odradek.errors import ErrorCode
from odradek.metadata.change_notifications import ZkNodeChangeNotificationListener
from odradek.metadata.delegation_token_znodes import (
    TOKEN_CHANGE_PREFIX,
    TOKEN_CHANGES_PATH,
    create_delegation_token_paths,
    create_token_change_notification,
    delete_delegation_token,
    get_delegation_token_info,
    set_or_create_delegation_token,
    token_ids,
)
from odradek.metadata.store import CoordinationStore
from odradek.security.delegation_token import (
    ERROR_TIMESTAMP,
    TokenCache,
    TokenInformation,
    TokenSettings,
    create_hmac,
    expire,
    new_token,
    renew,
)
from odradek.security.principal import KafkaPrincipal

__all__ = ["DelegationTokenManager"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class DelegationTokenManager:
    """See the module docstring. ``cache`` is shared with the SCRAM servers of the listeners."""

    def __init__(
        self,
        settings: TokenSettings,
        cache: TokenCache | None = None,
        *,
        broker_id: int = -1,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.settings = settings
        self.cache = cache if cache is not None else TokenCache()
        self.broker_id = broker_id
        self._clock_ms = clock_ms
        self._lock = asyncio.Lock()
        self._store: CoordinationStore | None = None
        self._listener: ZkNodeChangeNotificationListener | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def hmac(self, token_id: str) -> bytes:
        assert self.settings.secret_key is not None
        return create_hmac(token_id, self.settings.secret_key)

    # --- lifecycle ---------------------------------------------------------------------------

    async def startup(self, store: CoordinationStore) -> None:
        """Create the paths, load the tokens, follow the notifications, start the sweep."""
        if not self.enabled:
            return
        self._store = store
        await create_delegation_token_paths(store)
        async with self._lock:
            ids = await token_ids(store)
            for token_id in ids:
                await self._refresh(token_id)
        log.info("broker %d: loaded %d delegation token(s)", self.broker_id, len(self.cache))
        self._listener = ZkNodeChangeNotificationListener(
            store, TOKEN_CHANGES_PATH, TOKEN_CHANGE_PREFIX, self._on_notification
        )
        await self._listener.init()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop(), name="delete-expired-tokens")

    async def shutdown(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sweeper
            self._sweeper = None
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _sweep_loop(self) -> None:
        interval_s = self.settings.expiry_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire_tokens()
            except Exception:
                log.warning("broker %d: the expired token sweep failed", self.broker_id, exc_info=True)

    async def _on_notification(self, data: bytes) -> None:
        token_id = data.decode("utf-8", errors="replace")
        async with self._lock:
            await self._refresh(token_id)

    async def _refresh(self, token_id: str) -> None:
        """Read one token from the store into the cache (removed when its znode is gone)."""
        assert self._store is not None
        try:
            info = await get_delegation_token_info(self._store, token_id)
        except ValueError:
            log.error("broker %d: cannot read delegation token %s", self.broker_id, token_id, exc_info=True)
            return
        if info is None:
            self.cache.remove(token_id)
        else:
            self.cache.update(info, self.hmac(info.token_id))

    async def _update_token(self, info: TokenInformation) -> None:
        assert self._store is not None
        await set_or_create_delegation_token(self._store, info)
        self.cache.update(info, self.hmac(info.token_id))
        await create_token_change_notification(self._store, info.token_id)

    async def _remove_token(self, token_id: str) -> None:
        assert self._store is not None
        await delete_delegation_token(self._store, token_id)
        self.cache.remove(token_id)
        await create_token_change_notification(self._store, token_id)

    # --- operations --------------------------------------------------------------------------

    async def create_token(
        self,
        owner: KafkaPrincipal,
        requester: KafkaPrincipal,
        renewers: Sequence[KafkaPrincipal],
        max_lifetime_ms: int,
    ) -> tuple[ErrorCode, TokenInformation | None, bytes]:
        """(error, the new token, its HMAC); DELEGATION_TOKEN_AUTH_DISABLED without a secret."""
        if not self.enabled:
            return ErrorCode.delegation_token_auth_disabled, None, b""
        async with self._lock:
            info = new_token(self.settings, owner, requester, renewers, max_lifetime_ms, self._clock_ms())
            await self._update_token(info)
        log.info("broker %d: created delegation token %s for owner %s", self.broker_id, info.token_id, owner)
        return ErrorCode.none, info, self.hmac(info.token_id)

    async def renew_token(
        self, principal: KafkaPrincipal, token_hmac: bytes, renew_period_ms: int
    ) -> tuple[ErrorCode, int]:
        """(error, the new expiry timestamp or -1)."""
        return await self._change_expiry(
            token_hmac, lambda info, now_ms: renew(self.settings, principal, info, renew_period_ms, now_ms), "renewed"
        )

    async def expire_token(
        self, principal: KafkaPrincipal, token_hmac: bytes, expiry_period_ms: int
    ) -> tuple[ErrorCode, int]:
        """(error, the new expiry timestamp or -1); a negative period removes the token now."""
        return await self._change_expiry(
            token_hmac,
            lambda info, now_ms: expire(principal, info, expiry_period_ms, now_ms),
            "set the expiry of",
            remove=expiry_period_ms < 0,
        )

    async def _change_expiry(
        self,
        token_hmac: bytes,
        change: Callable[[TokenInformation, int], tuple[ErrorCode, TokenInformation | None]],
        action: str,
        *,
        remove: bool = False,
    ) -> tuple[ErrorCode, int]:
        """Renew's and Expire's common step: find the token by its HMAC under the lock, apply
        ``change`` (which checks owner or renewer and expiry: ``renew`` or ``expire``) at the clock's
        now, then store the changed token, or remove it when ``remove``. (error, the new expiry
        timestamp or -1): DELEGATION_TOKEN_AUTH_DISABLED without a secret, NOT_FOUND for an unknown
        HMAC, else ``change``'s error."""
        if not self.enabled:
            return ErrorCode.delegation_token_auth_disabled, ERROR_TIMESTAMP
        async with self._lock:
            info = self.cache.token_for_hmac(token_hmac)
            if info is None:
                return ErrorCode.delegation_token_not_found, ERROR_TIMESTAMP
            error, changed = change(info, self._clock_ms())
            if changed is None:
                return error, ERROR_TIMESTAMP
            if remove:
                await self._remove_token(info.token_id)
            else:
                await self._update_token(changed)
        log.info("broker %d: %s delegation token %s of %s", self.broker_id, action, info.token_id, info.owner)
        return ErrorCode.none, changed.expiry_timestamp

    async def expire_tokens(self) -> list[str]:
        """Remove every token past its expiry or max timestamp; the ids removed."""
        if not self.enabled or self._store is None:
            return []
        removed = []
        async with self._lock:
            now = self._clock_ms()
            for info in self.cache.tokens():
                if info.expired(now):
                    log.info("broker %d: delegation token %s of %s expired", self.broker_id, info.token_id, info.owner)
                    await self._remove_token(info.token_id)
                    removed.append(info.token_id)
        return removed

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[tuple[TokenInformation, bytes]]:
        """The cached tokens ``eligible`` keeps, each with its HMAC."""
        return [(info, self.hmac(info.token_id)) for info in self.cache.tokens() if eligible(info)]

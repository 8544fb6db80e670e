"""The console's ASGI application: :func:`create_app` builds a Starlette app from a :class:`ConsoleConfig`.

Pieces shared by the route modules (``routes_*.py``):

- :class:`Console` (``request.app.state.console``): the config, the :class:`ClientLoop`, the
  sessions, the throughput poller and the Jinja2 templates (autoescape on for every template);
- the session middleware: loads or creates the request's :class:`~odradek.console.auth.Session`
  (``request.state.session``), sets the cookie on new sessions, and sends anonymous visitors to
  ``/login`` when sign-in is required; it also sets the security headers (a strict
  Content-Security-Policy: scripts and styles from the console itself only);
- :func:`cluster_call`: runs a data function with the session's admin client on the client loop
  and turns Kafka errors, refused logins and timeouts into an error page (never a traceback);
- :func:`form_for_change` / :func:`form_checked`: every POST handler's first call: the form, after
  the CSRF check (403 otherwise) and, for changes, the ``--read-only`` check (403).

Handlers run on the web server's event loop; cluster work never does (see :mod:`.bridge`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, TypeVar

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from odradek.cli.common import CommandError
from odradek.client.admin import AdminClient
from odradek.client.errors import KafkaAuthenticationError, KafkaConnectionError
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.console.auth import COOKIE, Session, SessionStore, check_csrf
from odradek.console.bridge import ClientLoop
from odradek.console.guard import AclGuard
from odradek.console.metrics import ThroughputPoller
from odradek.console.render import config_source_name, human_bytes, timestamp_text
from odradek.console.zk_data import ZooKeeperReader
from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import parse_super_users
from odradek.security.principal import KafkaPrincipal

__all__ = ["Console", "ConsoleConfig", "cluster_call", "create_app", "form_checked", "form_for_change", "page"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_PROXY_USER = 1024
SWEEP_INTERVAL_S = 60.0
PUBLIC_PATHS = ("/login", "/static/", "/favicon.ico")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
MAX_FORM_BYTES = 64 * 1024
DENIED = frozenset(
    {
        ErrorCode.topic_authorization_failed,
        ErrorCode.group_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.transactional_id_authorization_failed,
    }
)


MISSING = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.group_id_not_found})


@dataclass
class ConsoleConfig:
    bootstrap_servers: str
    security: ClientSecurity = PLAINTEXT_SECURITY
    """The console's own client properties (``--command-config``)."""
    zookeeper: str | None = None
    metrics_urls: list[str] = field(default_factory=list)
    read_only: bool = False
    sign_in: bool = False
    """Require users to sign in with their SCRAM credentials (see :mod:`.auth`)."""
    schema_registry_url: str | None = None
    request_timeout_ms: int = 10000
    auth_proxy_header: str | None = None
    """The request header an authenticating proxy names the user in (see :mod:`.guard`)."""
    super_users: str = ""
    """``super.users`` as the brokers have it (``User:a;User:b``), for evaluating ACLs in proxy mode."""
    allow_everyone_if_no_acl_found: bool = False
    chart_interval_s: float = 5.0
    """How often the chart polls and the brokers' metrics are scraped at most."""


class Console:
    """Everything the handlers share (one per app)."""

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.clients = ClientLoop(config.bootstrap_servers, request_timeout_ms=config.request_timeout_ms)
        self.sessions = SessionStore(config.security)
        self.throughput = ThroughputPoller(config.metrics_urls, config.chart_interval_s)
        self.zookeeper = ZooKeeperReader(config.zookeeper) if config.zookeeper else None
        self.swept_at = time.monotonic()
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(files("odradek.console") / "templates")),
            autoescape=True,
        )
        self.templates = Jinja2Templates(env=env)
        env.filters["bytes"] = human_bytes
        env.filters["ts"] = timestamp_text
        env.filters["config_source"] = config_source_name
        env.globals["read_only"] = config.read_only
        env.globals["chart_interval_ms"] = int(config.chart_interval_s * 1000)
        env.globals["registry"] = config.schema_registry_url is not None

    async def close(self) -> None:
        await self.throughput.close()
        zookeeper = self.zookeeper
        if zookeeper is not None:
            try:
                await self.clients.call(zookeeper.close, 5)
            except Exception:  # closing is best effort
                log.debug("closing the ZooKeeper session failed", exc_info=True)
        self.clients.close()


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def session_of(request: Request) -> Session:
    session: Session = request.state.session
    return session


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """Render ``template`` with the session's user and CSRF token in the context."""
    session = session_of(request)
    context.setdefault("refresh", None)
    context.update(request=request, user=session.user, csrf_token=session.csrf)
    return console_of(request).templates.TemplateResponse(request, template, context, status_code=status_code)


class ClusterError(Exception):
    """A cluster call that failed: ``status`` and a one-line ``message`` for the error page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def cluster_call(request: Request, fn: Callable[[AdminClient], Awaitable[T]], timeout_s: float = 15.0) -> T:
    """``await fn(admin)`` on the client loop with the session's own admin client.

    Raises :class:`ClusterError` (rendered by the app's handler): 403 for authorization
    failures, 404 for an unknown topic or group, 401 for a refused login, 504 for a timeout, 502
    for other cluster errors."""
    console = console_of(request)
    security = session_of(request).security

    session = session_of(request)
    guard = None
    if session.proxied and session.user is not None:
        guard = AclGuard(
            KafkaPrincipal("User", session.user),
            parse_super_users(console.config.super_users),
            console.config.allow_everyone_if_no_acl_found,
        )

    async def run() -> T:
        if guard is not None:
            return await fn(console.clients.guarded_admin(security, guard))
        return await fn(console.clients.admin(security))

    try:
        return await console.clients.call(run, timeout_s)
    except TimeoutError:
        raise ClusterError(504, f"the cluster did not answer within {timeout_s:.0f} s") from None
    except KafkaAuthenticationError as exc:
        raise ClusterError(401, f"the cluster refused the login: {exc}") from None
    except KafkaConnectionError as exc:
        raise ClusterError(502, f"cannot reach the cluster: {exc}") from None
    except KafkaError as exc:
        status = 403 if exc.error_code in DENIED else 404 if exc.error_code in MISSING else 502
        raise ClusterError(status, f"{exc.error_code.name.upper()}: {exc}") from None
    except CommandError as exc:
        raise ClusterError(409, str(exc)) from None


async def form_checked(request: Request) -> FormData:
    """The POSTed form after the CSRF check (HTTPException 403 when the token is missing or wrong)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_FORM_BYTES):
        raise HTTPException(413, "form too large")
    form = await request.form(max_files=0, max_fields=100)
    if not check_csrf(session_of(request), form.get("csrf_token")):
        raise HTTPException(403, "CSRF check failed: reload the page and try again")
    return form


async def form_for_change(request: Request) -> FormData:
    """:func:`form_checked`, then refused (403) when the console is ``--read-only``."""
    form = await form_checked(request)
    if console_of(request).config.read_only:
        raise HTTPException(403, "the console is read-only: changes are refused")
    return form


class SessionMiddleware(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        console = console_of(request)
        now = time.monotonic()
        if now - console.swept_at > SWEEP_INTERVAL_S:
            console.swept_at = now
            for gone in console.sessions.expired():
                if not console.sessions.in_use(gone.security):
                    await console.clients.forget(gone.security)
        session = console.sessions.get(request.cookies.get(COOKIE))
        fresh = session is None
        if session is None:
            session = console.sessions.create()
        request.state.session = session
        path = request.url.path
        header = console.config.auth_proxy_header
        if header is not None and not path.startswith("/static/"):
            named = request.headers.get(header, "").strip()
            if not named or len(named) > MAX_PROXY_USER:
                return Response(f"the authenticating proxy named no user ({header})", 401, media_type="text/plain")
            if session.user != named:
                session = console.sessions.rotate(session)
                session.user, session.proxied = named, True
                request.state.session = session
            response: Response = await call_next(request)
        elif console.config.sign_in and session.user is None and not path.startswith(PUBLIC_PATHS):
            response = RedirectResponse("/login", status_code=303)
        else:
            response = await call_next(request)
        if fresh or request.state.session.token != request.cookies.get(COOKIE):
            token = request.state.session.token
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def _error_handlers() -> dict[Any, Callable[[Request, Any], Awaitable[Response]]]:
    async def cluster_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ClusterError)
        return page(request, "error.html", exc.status, message=exc.message)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if not hasattr(request.state, "session"):
            return Response(exc.detail, exc.status_code)
        return page(request, "error.html", exc.status_code, message=exc.detail)

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("console page %s failed", request.url.path, exc_info=exc)
        return Response("Internal error: see the console's log", 500, media_type="text/plain")

    return {ClusterError: cluster_error, HTTPException: http_error, Exception: unexpected}


def create_app(config: ConsoleConfig, routes: list[BaseRoute] | None = None) -> Starlette:
    """The console's app; its lifespan closes the cluster clients on shutdown."""
    from odradek.console import routes_cluster, routes_groups, routes_security, routes_topics

    console = Console(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await console.close()

    all_routes = [
        *routes_cluster.ROUTES,
        *routes_topics.ROUTES,
        *routes_groups.ROUTES,
        *routes_security.ROUTES,
        Mount("/static", StaticFiles(directory=str(files("odradek.console") / "static")), name="static"),
        *(routes or []),
    ]
    app = Starlette(routes=all_routes, lifespan=lifespan, exception_handlers=_error_handlers())
    app.state.console = console
    app.add_middleware(SessionMiddleware)
    return app

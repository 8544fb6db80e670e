"""Sign-in and security pages: ``/login``, ``/logout``, ACLs (``/acls``) and SCRAM users (``/users``).

Sign-in (when the console requires it, see :mod:`.auth`): the form's credentials replace those of
the console's ``--command-config`` and a connection is opened with them; the broker's SCRAM
exchange accepts or refuses. On success the session gets a new token (no fixation) and keeps that
connection; on failure the connection is closed and the form says only that sign-in failed.
"""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from odradek.client.errors import KafkaAuthenticationError, KafkaConnectionError
from odradek.console import cluster_data
from odradek.console.app import cluster_call, console_of, form_checked, page, session_of

__all__ = ["ROUTES"]

MAX_CREDENTIAL = 1024


async def login(request: Request) -> Response:
    console = console_of(request)
    if request.method == "GET":
        return page(request, "login.html", error=None, sign_in=console.config.sign_in)
    form = await form_checked(request)
    username, password = str(form.get("username", "")), str(form.get("password", ""))
    if not console.config.sign_in:
        return RedirectResponse("/", status_code=303)
    if not username or not password or len(username) > MAX_CREDENTIAL or len(password) > MAX_CREDENTIAL:
        return page(request, "login.html", 400, error="User name and password are required.", sign_in=True)
    security = dataclasses.replace(console.config.security, sasl_username=username, sasl_password=password)

    async def check() -> None:
        await console.clients.admin(security).cluster.any_connection()

    try:
        await console.clients.call(check, 15)
    except (KafkaAuthenticationError, KafkaConnectionError, TimeoutError) as exc:
        await console.clients.forget(security)
        refused = isinstance(exc, KafkaAuthenticationError)
        message = "Sign-in failed: wrong user name or password." if refused else f"Cannot reach the cluster: {exc}"
        return page(request, "login.html", 401 if refused else 502, error=message, sign_in=True)
    session = console.sessions.rotate(session_of(request))
    session.user = username
    session.security = security
    return RedirectResponse("/", status_code=303)


async def logout(request: Request) -> Response:
    await form_checked(request)
    console = console_of(request)
    session = session_of(request)
    console.sessions.drop(session)
    if not console.sessions.in_use(session.security):
        await console.clients.forget(session.security)
    request.state.session = console.sessions.create()
    return RedirectResponse("/login" if console.config.sign_in else "/", status_code=303)


async def acls(request: Request) -> Response:
    bindings, refused = await cluster_call(request, cluster_data.acls)
    return page(request, "acls.html", bindings=bindings, refused=refused)


async def users(request: Request) -> Response:
    rows = await cluster_call(request, cluster_data.scram_user_list)
    return page(request, "users.html", users=rows)


ROUTES = [
    Route("/login", login, methods=["GET", "POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/acls", acls),
    Route("/users", users),
]

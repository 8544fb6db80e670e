"""Who owns an OAUTHBEARER login, and that its refresh thread ends with its last user.

Against a real OpenID Connect issuer (:class:`odradek.testing_oidc.OidcIssuer`, https with
certificates made at test time) whose tokens live 2 s, refreshed about every second
(``sasl.login.refresh.*``): two client securities of one configuration share one login, which
refreshes until both are closed, then its thread is gone and the issuer hears no more token
requests; a login whose issuer has gone away stops retrying when its user closes; a security
dropped without a close stops refreshing once collected; a broker's inter-broker login ends with
the broker's shutdown, and a command-line tool's login with the command.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import pathlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.cli import topics
from odradek.client.security import ClientSecurity
from odradek.errors import InvalidConfigError
from odradek.server.runner import BrokerRunner
from odradek.testing_oidc import OidcIssuer, oidc_issuer

from .oidc_support import LOGIN_HANDLER, LOGIN_MODULE, validating_listener
from .security_support import address, write_certificates

TOKEN_LIFETIME_S = 2
REFRESH = {
    "sasl.login.refresh.window.factor": "0.5",
    "sasl.login.refresh.window.jitter": "0.0",
    "sasl.login.refresh.min.period.seconds": "1",
    "sasl.login.refresh.buffer.seconds": "0",
    "sasl.login.retry.backoff.ms": "50",
    "sasl.login.retry.backoff.max.ms": "200",
}
QUIET_S = 2.5
"""Longer than two refresh periods: a login still refreshing would ask the issuer meanwhile."""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("login-lifecycle-certs"))


@pytest.fixture(scope="module")
def issuer(certificates: dict[str, str]) -> Iterator[OidcIssuer]:
    with oidc_issuer(certificates["server"]) as issuer:
        for name in ("shared", "dropped", "broker", "tool"):
            issuer.register(name, f"{name}-secret", subject=f"svc-{name}", lifetime_s=TOKEN_LIFETIME_S)
        yield issuer


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def tokens(issuer: OidcIssuer, client: str) -> int:
    return sum(1 for claims in issuer.issued if claims["sub"] == f"svc-{client}")


def refresh_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "oauthbearer-login-refresh"}


def client_keys(url: str, ca: str, client: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": LOGIN_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": url,
        "sasl.jaas.config": (
            f'{LOGIN_MODULE} required clientId="{client}" clientSecret="{client}-secret" '
            f'ssl.truststore.type="PEM" ssl.truststore.location="{ca}";'
        ),
        **REFRESH,
    }


def refresh_thread_of(security: ClientSecurity) -> threading.Thread:
    login = security.oauthbearer_login
    assert login is not None and login.refresh_thread is not None
    return login.refresh_thread


def test_two_users_share_one_login_until_both_close(issuer: OidcIssuer, certificates: dict[str, str]) -> None:
    keys = client_keys(issuer.token_url, certificates["ca"], "shared")
    first, second = ClientSecurity.from_properties(keys), ClientSecurity.from_properties(keys)
    login = first.oauthbearer_login
    assert login is not None and second.oauthbearer_login is login  # one login per configuration
    thread = refresh_thread_of(first)
    assert thread in threading.enumerate()
    first.close()
    first.close()  # one user's second close does not release the other's hold
    held = tokens(issuer, "shared")
    wait_for(lambda: tokens(issuer, "shared") > held, 5, "a refresh while the second user holds the login")
    assert thread.is_alive() and not login.closed
    assert second.sasl_client().evaluate_challenge(b"") is not None
    second.close()
    assert thread not in threading.enumerate() and login.closed  # close joined the thread
    after = tokens(issuer, "shared")
    time.sleep(QUIET_S)
    assert tokens(issuer, "shared") == after, "a closed login asked the issuer for a token"
    again = ClientSecurity.from_properties(keys)  # a closed login is never handed out again
    try:
        assert again.oauthbearer_login is not login and tokens(issuer, "shared") == after + 1
    finally:
        again.close()
    assert refresh_thread_of(again) not in threading.enumerate()


def test_a_login_whose_issuer_is_gone_stops_retrying_on_close(
    certificates: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with oidc_issuer(certificates["server"]) as gone:
        gone.register("orphan", "orphan-secret", lifetime_s=TOKEN_LIFETIME_S)
        security = ClientSecurity.from_properties(client_keys(gone.token_url, certificates["ca"], "orphan"))
    thread = refresh_thread_of(security)
    logger = "odradek.security.sasl.oauthbearer_login"
    with caplog.at_level(logging.WARNING, logger=logger):
        failed = lambda: any("refresh failed" in r.getMessage() for r in caplog.records)  # noqa: E731
        wait_for(failed, 5, "a failed refresh against the closed issuer")
        assert thread.is_alive()  # retrying with backoff
        started = time.monotonic()
        security.close()
        assert time.monotonic() - started < 1.0, "close waited for the backoff"
        assert thread not in threading.enumerate()
        caplog.clear()
        time.sleep(0.6)  # three times the longest backoff
    assert not [r for r in caplog.records if r.name == logger], "a closed login kept retrying"


def test_a_security_dropped_without_close_stops_refreshing(issuer: OidcIssuer, certificates: dict[str, str]) -> None:
    security = ClientSecurity.from_properties(client_keys(issuer.token_url, certificates["ca"], "dropped"))
    thread = refresh_thread_of(security)
    held = tokens(issuer, "dropped")
    wait_for(lambda: tokens(issuer, "dropped") > held, 5, "a refresh")
    del security
    gc.collect()
    wait_for(lambda: not thread.is_alive(), 2, "the refresh thread of an unreferenced login to end")
    after = tokens(issuer, "dropped")
    time.sleep(QUIET_S)
    assert tokens(issuer, "dropped") == after


def test_broker_shutdown_and_a_tool_close_their_logins(
    tmp_path: pathlib.Path, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    runner = BrokerRunner(
        str(tmp_path / "broker"),
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            **validating_listener("sasl_plaintext", issuer, certificates["ca"]),
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                f'{LOGIN_MODULE} required clientId="broker" clientSecret="broker-secret" '
                f'ssl.truststore.type="PEM" ssl.truststore.location="{certificates["ca"]}";'
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class": LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
            **REFRESH,
            "offsets.topic.replication.factor": "1",
        },
    ).start()
    try:
        assert runner.broker is not None
        broker_thread = refresh_thread_of(runner.broker.inter_broker_security)
        held = tokens(issuer, "broker")
        wait_for(lambda: tokens(issuer, "broker") > held, 5, "the broker's refresh")
        # a tool's login (its own client id) ends with the command
        config = tmp_path / "client.properties"
        keys = client_keys(issuer.token_url, certificates["ca"], "tool")
        config.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        before, asked = refresh_threads(), tokens(issuer, "tool")
        stdout = io.StringIO()
        argv = ["--bootstrap-server", address(runner, "SASL_PLAINTEXT"), "--command-config", str(config), "--list"]
        with contextlib.redirect_stdout(stdout):
            assert topics.main(argv) == 0
        assert tokens(issuer, "tool") == asked + 1  # the tool logged in
        assert refresh_threads() <= before, "the tool's refresh thread outlived the command"
    finally:
        runner.stop()
    assert broker_thread not in threading.enumerate()
    after = tokens(issuer, "broker")
    time.sleep(QUIET_S)
    assert tokens(issuer, "broker") == after, "the stopped broker's login asked the issuer for a token"
    assert tokens(issuer, "tool") == asked + 1


def test_a_broker_whose_login_cannot_be_built_fails_at_once(tmp_path: pathlib.Path) -> None:
    runner = BrokerRunner(
        str(tmp_path / "unbuildable"),
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",  # and no JAAS entry to log in with
        },
    )
    started = time.monotonic()
    with pytest.raises(InvalidConfigError, match="OAUTHBEARER needs a login"):
        runner.start(timeout=20)
    assert time.monotonic() - started < 5  # the broker's constructor failed: no wait for the start timeout
    assert runner.loop is not None and runner.loop.is_closed()  # its event loop's self-pipe is closed
    runner.stop()

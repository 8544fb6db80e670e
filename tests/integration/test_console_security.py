"""The console's security in a real browser and over HTTP: sign-in against the cluster's SCRAM
credentials, ACLs enforced for the signed-in principal, CSRF on every form, ``--read-only``.

One broker: clients on SASL_PLAINTEXT (SCRAM-SHA-256), Kafka's AclAuthorizer, ``super.users=User:admin``;
``alice`` may DESCRIBE/READ/WRITE topic ``visible`` and READ group ``g``, nothing else (so the topic
``classified`` must not exist for her). The console's own ``--command-config`` identity is ``admin``;
people sign in as themselves, and every page then acts through their own connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from odradek.client.security import ClientSecurity
from odradek.console.app import ConsoleConfig
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as Type
from odradek.server.runner import BrokerRunner

from .authz_support import CLUSTER_ACTION, acl, start_scram_acl_broker
from .console_support import ConsoleServer, chromium_session, console_errors, csrf_of, text_of, wait_for
from .security_support import address

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
ALICE = "User:alice"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    data_dir = str(tmp_path_factory.mktemp("console-security"))

    bindings = [
        CLUSTER_ACTION,
        *(acl(Type.TOPIC, "visible", op, principal=ALICE) for op in (Op.DESCRIBE, Op.READ, Op.WRITE)),
        acl(Type.GROUP, "g", Op.READ, principal=ALICE),
    ]
    runner = start_scram_acl_broker(data_dir, USERS, bindings)
    try:
        admin = AdminClient(
            {
                "bootstrap.servers": address(runner, "SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "admin",
                "sasl.password": USERS["admin"],
            }
        )
        for future in admin.create_topics([NewTopic("visible", 1, 1), NewTopic("classified", 1, 1)]).values():
            future.result(15)
        yield runner
    finally:
        runner.stop()


def _config(broker: BrokerRunner, **overrides: object) -> ConsoleConfig:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
        }
    )
    config = ConsoleConfig(address(broker, "SASL_PLAINTEXT"), security=security, sign_in=True)
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


@pytest.fixture(scope="module")
def console(broker: BrokerRunner) -> Iterator[ConsoleServer]:
    with ConsoleServer(_config(broker)) as server:
        yield server


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium_session(str(tmp_path_factory.mktemp("chromium-profile"))) as driver:
        yield driver


def _sign_in(client: httpx.Client, user: str, password: str) -> httpx.Response:
    token = csrf_of(client.get("/login").text)
    return client.post("/login", data={"csrf_token": token, "username": user, "password": password})


def test_anonymous_visitors_are_sent_to_sign_in(console: ConsoleServer) -> None:
    with httpx.Client(base_url=console.url) as client:
        for path in ("/", "/topics", "/topics/visible/messages", "/acls"):
            response = client.get(path)
            assert response.status_code == 303 and response.headers["location"] == "/login", path


def test_a_wrong_password_is_refused(console: ConsoleServer) -> None:
    with httpx.Client(base_url=console.url) as client:
        response = _sign_in(client, "alice", "wrong")
        assert response.status_code == 401
        assert "Sign-in failed" in response.text
        assert client.get("/topics").status_code == 303


def test_alice_signs_in_and_sees_only_what_her_acls_allow(console: ConsoleServer, browser: WebDriver) -> None:
    browser.get(console.url + "/topics")
    wait_for(browser, lambda d: d.find_elements(By.ID, "login-form"))
    browser.find_element(By.ID, "username").send_keys("alice")
    browser.find_element(By.ID, "password").send_keys(USERS["alice"])
    browser.find_element(By.ID, "sign-in").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "user"))
    assert text_of(browser, "#user") == "alice"
    assert not console_errors(browser)
    cookies = browser.get_cookies()
    assert [c["name"] for c in cookies] == ["odradek_console"]
    assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
    assert USERS["alice"] not in cookies[0]["value"] and "alice" not in cookies[0]["value"]
    browser.get(console.url + "/topics")
    names = [row.get_attribute("data-topic") for row in browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")]
    assert names == ["visible"]  # "classified" is not there for her
    browser.get(console.url + "/topics/classified")
    assert "does not exist or is not visible" in text_of(browser, "#error")
    browser.get(console.url + "/topics/classified/messages")
    assert browser.find_elements(By.ID, "error")
    browser.get(console.url + "/topics/visible")
    assert text_of(browser, "#topic-name") == "visible"
    console_errors(browser)  # the refused pages answered 4xx: expected


def test_alice_may_not_create_topics(console: ConsoleServer) -> None:
    with httpx.Client(base_url=console.url) as client:
        assert _sign_in(client, "alice", USERS["alice"]).status_code == 303
        token = csrf_of(client.get("/topics/new").text)
        response = client.post("/topics/new", data={"csrf_token": token, "name": "alices-own", "partitions": "1"})
        assert response.status_code == 403
        assert "AUTHORIZATION_FAILED" in response.text


def test_every_post_needs_the_sessions_csrf_token(console: ConsoleServer) -> None:
    with httpx.Client(base_url=console.url) as admin, httpx.Client(base_url=console.url) as other:
        assert _sign_in(admin, "admin", USERS["admin"]).status_code == 303
        assert _sign_in(other, "alice", USERS["alice"]).status_code == 303
        foreign = csrf_of(other.get("/topics/new").text)
        for data in ({}, {"csrf_token": ""}, {"csrf_token": foreign}):
            response = admin.post("/topics/new", data={**data, "name": "csrf-victim", "partitions": "1"})
            assert response.status_code == 403, data
            assert "CSRF" in response.text
        for path, data in {
            "/topics/visible/delete": {"confirm": "visible"},
            "/groups/reset": {"id": "g", "how": "earliest", "step": "execute", "offset:visible:0": "0"},
            "/groups/delete": {"id": "g", "confirm": "g"},
            "/logout": {},
            "/login": {"username": "alice", "password": USERS["alice"]},
        }.items():
            response = admin.post(path, data={**data, "csrf_token": foreign})
            assert response.status_code == 403 and "CSRF" in response.text, path
        topics = admin.get("/topics?q=csrf")
        assert "csrf-victim" not in topics.text and "visible" in admin.get("/topics").text
        token = csrf_of(admin.get("/topics/new").text)
        response = admin.post("/topics/new", data={"csrf_token": token, "name": "csrf-ok", "partitions": "1"})
        assert response.status_code == 303  # the same form with the session's token goes through


def test_sign_out_ends_the_session(console: ConsoleServer) -> None:
    with httpx.Client(base_url=console.url) as client:
        assert _sign_in(client, "alice", USERS["alice"]).status_code == 303
        old = client.cookies.get("odradek_console")
        token = csrf_of(client.get("/").text)
        assert client.post("/logout", data={"csrf_token": token}).status_code == 303
        assert client.get("/topics").status_code == 303
        with httpx.Client(base_url=console.url, cookies={"odradek_console": old or ""}) as replay:
            assert replay.get("/topics").status_code == 303  # the old token is gone


def test_read_only_refuses_every_change(broker: BrokerRunner) -> None:
    server = ConsoleServer(_config(broker, read_only=True)).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            assert _sign_in(client, "admin", USERS["admin"]).status_code == 303
            page = client.get("/topics")
            assert "read-only" in page.text and "create-topic" not in page.text
            token = csrf_of(page.text)
            posts = {
                "/topics/new": {"name": "ro-topic", "partitions": "1"},
                "/topics/visible/delete": {"confirm": "visible"},
                "/groups/reset": {"id": "g", "how": "earliest", "step": "execute", "offset:visible:0": "0"},
                "/groups/delete": {"id": "g", "confirm": "g"},
            }
            for path, data in posts.items():
                response = client.post(path, data={"csrf_token": token, **data})
                assert response.status_code == 403 and "read-only" in response.text, path
            assert "ro-topic" not in client.get("/topics").text
            assert "visible" in client.get("/topics").text
    finally:
        server.stop()
    clients = server.app.state.console.clients
    assert clients.closed  # the console's client loop closed with the app: no self-pipe left to the GC


def test_a_proxy_named_user_sees_only_what_the_acls_allow(broker: BrokerRunner) -> None:
    server = ConsoleServer(
        _config(broker, sign_in=False, auth_proxy_header="X-Forwarded-User", super_users="User:admin")
    ).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/topics").status_code == 401  # the proxy named nobody
            alice = {"X-Forwarded-User": "alice"}
            page = client.get("/topics", headers=alice)
            assert page.status_code == 200 and "alice" in page.text
            assert 'data-topic="visible"' in page.text and "classified" not in page.text
            assert "classified" not in client.get("/", headers=alice).text
            for path in ("/topics/classified", "/topics/classified/messages"):
                response = client.get(path, headers=alice)
                assert response.status_code in (403, 404) and "classified" in response.text, path
            assert client.get("/topics/visible/messages", headers=alice).status_code == 200
            assert client.get("/acls", headers=alice).text.count("CLUSTER_AUTHORIZATION_FAILED") == 1
            assert client.get("/users", headers=alice).status_code == 403
            token = csrf_of(client.get("/topics/new", headers=alice).text)
            created = client.post("/topics/new", headers=alice, data={"csrf_token": token, "name": "by-alice"})
            assert created.status_code == 403 and "TOPIC_AUTHORIZATION_FAILED" in created.text
            deleted = client.post(
                "/topics/visible/delete", headers=alice, data={"csrf_token": token, "confirm": "visible"}
            )
            assert deleted.status_code == 403
            admin = {"X-Forwarded-User": "admin"}  # the same cookie, another user: a new session
            page = client.get("/topics", headers=admin)
            assert 'data-topic="classified"' in page.text and 'data-topic="visible"' in page.text
            stale = client.post("/topics/new", headers=admin, data={"csrf_token": token, "name": "stale"})
            assert stale.status_code == 403 and "CSRF" in stale.text  # alice's token is not admin's
    finally:
        server.stop()

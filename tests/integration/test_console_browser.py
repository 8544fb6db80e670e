"""The web console in a real browser: Debian's headless Chromium driven by Selenium against a console
served by uvicorn, reading a real broker registered in a real ZooKeeper.

One broker (with its metrics listener), one console and one browser for the module. Each test
acts through a real client (confluent-kafka) and checks what the browser shows, or acts in the
browser and checks what a client sees; every page visited must leave no error in the browser's
console. The main pages' screenshots are written to ``docs/console/`` by the same run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from odradek.console.app import ConsoleConfig
from odradek.free_ports import free_port
from odradek.server.runner import BrokerRunner
from odradek.testing_zk import ZooKeeperServer

from .console_support import ConsoleServer, chromium_session, console_errors, text_of, wait_for

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    return zookeeper_server.chroot_connect()


@pytest.fixture(scope="module")
def broker(zk_connect: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("console-broker")),
        {
            "zookeeper.connect": zk_connect,
            "metrics.listener": "http://127.0.0.1:0",
            "num.partitions": "1",
            "group.share.heartbeat.interval.ms": "1000",
            "group.share.min.heartbeat.interval.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
        },
        broker_id=1,
    ).start()
    try:
        yield runner
    finally:
        runner.stop()


def _metrics_url(runner: BrokerRunner) -> str:
    assert runner.broker is not None
    host, port = runner.broker.metrics.bound
    return f"http://{host}:{port}/metrics"


@pytest.fixture(scope="module")
def console(broker: BrokerRunner, zk_connect: str) -> Iterator[ConsoleServer]:
    config = ConsoleConfig(
        broker.bootstrap_servers, metrics_urls=[_metrics_url(broker)], zookeeper=zk_connect, chart_interval_s=1.0
    )
    with ConsoleServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium_session(str(tmp_path_factory.mktemp("chromium-profile"))) as driver:
        yield driver


@pytest.fixture(scope="module")
def admin(broker: BrokerRunner) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(admin: AdminClient, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def _produce(
    broker: BrokerRunner, topic: str, records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for key, value, headers in records:
        producer.produce(topic, value, key, headers=headers)
    assert producer.flush(15) == 0


def _visit(driver: WebDriver, url: str) -> None:
    driver.get(url)
    errors = console_errors(driver)
    assert not errors, f"browser console errors on {url}: {errors}"


def _reload_until(driver: WebDriver, url: str, css: str, expected: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        _visit(driver, url)
        found = driver.find_elements(By.CSS_SELECTOR, css)
        seen = found[0].text if found else None
        if seen == expected:
            return
        time.sleep(0.3)
    raise AssertionError(f"{css} on {url} shows {seen!r}, not {expected!r}")


def test_overview_shows_the_broker_and_the_chart(
    console: ConsoleServer, broker: BrokerRunner, browser: WebDriver
) -> None:
    _visit(browser, console.url + "/")
    assert text_of(browser, "#broker-count") == "1"
    assert text_of(browser, "#controller") == "1"
    assert "1" in [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#brokers tbody td:first-child")]
    apis = text_of(browser, "#api-versions")
    assert "PRODUCE" in apis and "FETCH" in apis
    assert "group.version" in text_of(browser, "#features")
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(50):
                producer.produce("warm-up", b"x" * 2000)
            producer.flush(5)
            time.sleep(0.1)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart svg polyline.series-bytesin"), 20)
        wait_for(browser, lambda d: "bytesin: 0 B/s" not in d.find_element(By.ID, "chart-legend").text, 20)
    finally:
        stop.set()
        thread.join(10)
    assert "bytesin:" in text_of(browser, "#chart-legend")
    assert not console_errors(browser)
    browser.save_screenshot(str(SHOTS / "overview.png"))


def test_topics_table_shows_the_cluster(console: ConsoleServer, admin: AdminClient, browser: WebDriver) -> None:
    _create(admin, "orders", 3)
    _visit(browser, console.url + "/topics")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-topic="orders"]')
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1:5] == ["3", "1", "0", "0"]
    browser.save_screenshot(str(SHOTS / "topics.png"))
    _visit(browser, console.url + "/topics/orders")
    rows = browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == ["1", "1", "1"]
    configs = text_of(browser, "#configs")
    assert "cleanup.policy" in configs and "DEFAULT_CONFIG" in configs
    browser.save_screenshot(str(SHOTS / "topic.png"))


def test_a_produced_message_appears_and_markup_stays_text(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    _create(admin, "events")
    _produce(
        broker,
        "events",
        [
            (b"user-1", b'{"clicked": "buy", "n": 1}', [("trace", b"abc")]),
            (XSS.encode(), XSS.encode(), [(XSS, XSS.encode())]),
        ],
    )
    _visit(browser, console.url + "/topics/events/messages?format=json")
    assert text_of(browser, "#message-count") == "2 records"
    values = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#messages td.value pre")]
    assert '"clicked": "buy"' in values[0]
    assert values[1] == XSS  # the markup is shown as text, never run
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#messages td.key pre")] == ["user-1", XSS]
    assert XSS in text_of(browser, "#messages tbody tr:nth-child(2) td.headers")
    assert browser.execute_script("return window.__pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "#messages img")
    browser.save_screenshot(str(SHOTS / "messages.png"))
    _visit(browser, console.url + "/topics/events/messages?format=hex&max_bytes=4&partition=0&limit=1")
    assert text_of(browser, "#messages td.offset") == "0"
    browser.find_element(By.ID, "next-page").click()
    assert text_of(browser, "#messages td.offset") == "1"
    assert text_of(browser, "#messages td.value pre") == XSS.encode()[:4].hex(" ")
    assert "…" in text_of(browser, "#messages td.value .cut")


def _consume(broker: BrokerRunner, group: str, topic: str, count: int, protocol: str = "classic") -> None:
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    consumer = Consumer(config)
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            got += 1
            if got == count:
                consumer.commit(msg, asynchronous=False)
        assert got == count
    finally:
        consumer.close()


def test_group_lag_appears_and_drops(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    _create(admin, "lagging")
    _produce(broker, "lagging", [(None, b"m%d" % i, []) for i in range(10)])
    _consume(broker, "lag-group", "lagging", 3)
    url = console.url + "/groups/view?id=lag-group"
    _reload_until(browser, url, "#total-lag", "7")
    assert text_of(browser, "#group-state") == "Empty"
    _visit(browser, console.url + "/groups")
    assert browser.find_elements(By.CSS_SELECTOR, 'tr[data-group="lag-group"]')
    _consume(broker, "lag-group", "lagging", 7)
    _reload_until(browser, url, "#total-lag", "0")


def test_kip848_group_shows_epochs(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    _create(admin, "modern")
    _produce(broker, "modern", [(None, b"v", [])] * 4)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "modern-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["modern"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.3)
        url = console.url + "/groups/view?id=modern-group"
        _reload_until(browser, url, "#group-type", "consumer")
        _reload_until(browser, url, "#group-state", "Stable")
        assert int(text_of(browser, "#group-epoch")) >= 1
        cells = browser.find_elements(By.CSS_SELECTOR, "#members tbody tr td")
        assert "modern(0)" in [c.text.strip() for c in cells]  # current and target assignment
        browser.save_screenshot(str(SHOTS / "group.png"))
    finally:
        consumer.close()


def test_share_group_shows_members_and_start_offsets(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    _create(admin, "shared")
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, "share-group", incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    _produce(broker, "shared", [(None, b"s%d" % i, []) for i in range(4)])
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "share-group"})
    try:
        consumer.subscribe(["shared"])
        got = 0
        deadline = time.monotonic() + 20
        while got < 4 and time.monotonic() < deadline:
            got += len([m for m in consumer.poll(0.3) or [] if m.error() is None])
        assert got == 4
        consumer.poll(0.3)  # acknowledges the records delivered by the previous poll
        url = console.url + "/share-groups/view?id=share-group"
        _reload_until(browser, url, "#start-offsets tbody td:nth-child(3)", "4")
        assert text_of(browser, "#group-state") == "Stable"
        member_cells = [c.text.strip() for c in browser.find_elements(By.CSS_SELECTOR, "#members tbody td")]
        assert "shared(0)" in member_cells
        browser.save_screenshot(str(SHOTS / "share_group.png"))
        _visit(browser, console.url + "/groups")
        row = browser.find_element(By.CSS_SELECTOR, 'tr[data-group="share-group"]')
        assert row.find_elements(By.TAG_NAME, "td")[1].text == "share"
        browser.save_screenshot(str(SHOTS / "groups.png"))
    finally:
        consumer.close()


def test_topic_created_in_the_page_exists_for_a_client(
    console: ConsoleServer, admin: AdminClient, browser: WebDriver
) -> None:
    _visit(browser, console.url + "/topics/new")
    browser.find_element(By.ID, "name").send_keys("from-the-page")
    browser.find_element(By.ID, "partitions").send_keys("2")
    browser.find_element(By.ID, "configs").send_keys("retention.ms=3600000")
    browser.find_element(By.ID, "create").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "topic-name"))
    assert not console_errors(browser)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["from-the-page"].partitions) == 2


def _refused_confirmation(browser: WebDriver, link_id: str, wrong: str) -> None:
    """Follow the delete link ``link_id``, type ``wrong`` as the confirmation and wait for the
    page's refusal (the form stays, with its error)."""
    browser.find_element(By.ID, link_id).click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "confirm"))
    browser.find_element(By.ID, "confirm").send_keys(wrong)
    browser.find_element(By.ID, "confirm-delete").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "error"))


def test_delete_takes_a_confirmation(console: ConsoleServer, admin: AdminClient, browser: WebDriver) -> None:
    _create(admin, "doomed")
    _visit(browser, console.url + "/topics/doomed")
    _refused_confirmation(browser, "delete-topic", "not-doomed")
    assert "doomed" in admin.list_topics(timeout=10).topics
    console_errors(browser)  # the refused confirmation answers 400: expected
    browser.find_element(By.ID, "confirm").send_keys("doomed")
    browser.find_element(By.ID, "confirm-delete").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "topic-total"))
    deadline = time.monotonic() + 10
    while "doomed" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "doomed" not in admin.list_topics(timeout=10).topics


def test_reset_offsets_with_confirmation(console: ConsoleServer, broker: BrokerRunner, browser: WebDriver) -> None:
    _consume(broker, "reset-group", "lagging", 10)
    _visit(browser, console.url + "/groups/reset?id=reset-group")
    browser.find_element(By.ID, "preview").click()  # to earliest
    wait_for(browser, lambda d: d.find_elements(By.ID, "plan"))
    assert [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#plan tbody td")] == ["lagging", "0", "0"]
    browser.find_element(By.ID, "confirm-reset").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "total-lag"))
    assert text_of(browser, "#total-lag") == "10"


def _group_ids(admin: AdminClient) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


def test_delete_group_takes_a_confirmation_and_an_empty_group(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    """A wrong confirmation deletes nothing; a group with a live member is refused with Kafka's
    NON_EMPTY_GROUP, shown on the page; once the member has left, the group and its offsets go."""
    _create(admin, "kept-by-group")
    _produce(broker, "kept-by-group", [(None, b"m", [])])
    member = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "doomed-group", "auto.offset.reset": "earliest"}
    )
    try:
        member.subscribe(["kept-by-group"])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment()
        _visit(browser, console.url + "/groups/view?id=doomed-group")
        _refused_confirmation(browser, "delete-group", "another-group")
        assert "doomed-group" in _group_ids(admin)
        browser.find_element(By.ID, "confirm").send_keys("doomed-group")
        browser.find_element(By.ID, "confirm-delete").click()
        wait_for(browser, lambda d: "NON_EMPTY_GROUP" in d.find_element(By.TAG_NAME, "body").text)
        assert "doomed-group" in _group_ids(admin)
    finally:
        member.close()
        console_errors(browser)  # the refusals answer 400 and 409: expected, and not the next test's
    _visit(browser, console.url + "/groups/delete?id=doomed-group")
    browser.find_element(By.ID, "confirm").send_keys("doomed-group")
    browser.find_element(By.ID, "confirm-delete").click()
    wait_for(browser, lambda d: d.current_url.endswith("/groups"))
    assert not console_errors(browser)
    assert "doomed-group" not in _group_ids(admin)


def test_every_page_loads_without_console_errors(console: ConsoleServer, browser: WebDriver) -> None:
    for path in (
        "/",
        "/brokers",
        "/brokers/1",
        "/topics",
        "/groups",
        "/reassignments",
        "/transactions",
        "/acls",
        "/users",
    ):
        _visit(browser, console.url + path)
        assert browser.find_elements(By.TAG_NAME, "h1"), path
    browser.save_screenshot(str(SHOTS / "acls.png"))
    _visit(browser, console.url + "/brokers")
    assert '"brokerid": 1' in text_of(browser, "#zk-controller")
    zk_brokers = text_of(browser, "#zk-brokers")
    assert zk_brokers.splitlines()[1].startswith("1") and "PLAINTEXT://127.0.0.1" in zk_brokers
    browser.save_screenshot(str(SHOTS / "brokers.png"))


def test_bad_input_gets_a_precise_error(console: ConsoleServer, broker: BrokerRunner, admin: AdminClient) -> None:
    _create(admin, "bounded")
    _produce(broker, "bounded", [(b"k" * 100_000, b"v" * 300_000, [("h" * 1000, b"x" * 100_000)])])
    with httpx.Client(base_url=console.url, timeout=20) as client:
        cases = {
            "/topics/bounded/messages?offset=abc": (400, "offset must be a whole number"),
            "/topics/bounded/messages?offset=-5": (400, "offset must be between 0"),
            "/topics/bounded/messages?limit=100000": (400, "limit must be between 1 and 200"),
            "/topics/bounded/messages?max_bytes=10000000": (400, "max_bytes must be between 1 and 65536"),
            "/topics/bounded/messages?format=html": (400, "format must be one of text, json, hex"),
            "/topics/bounded/messages?timestamp=yesterday": (400, "timestamp must be ISO 8601"),
            "/topics/bounded/messages?partition=7": (404, "has no partition 7"),
            "/topics/no-such-topic": (404, "does not exist or is not visible"),
            "/groups/view?id=no-such-group": (404, "Consumer group &#39;no-such-group&#39; does not exist."),
            "/topics/bad%20name": (400, "not a valid topic name"),
            "/groups/view": (400, "a group id (1 to 1000 characters) is required"),
            "/groups/view?id=" + "g" * 1001: (400, "a group id (1 to 1000 characters) is required"),
            "/topics?page=-1": (400, "page must be between 0"),
        }
        for path, (status, message) in cases.items():
            response = client.get(path)
            assert response.status_code == status, (path, response.text[-400:])
            assert message in response.text, path
        future = client.get(f"/topics/bounded/messages?timestamp={int(time.time() * 1000) + 3_600_000}")
        assert future.status_code == 200 and "0 records" in future.text
        past = client.get("/topics/bounded/messages?timestamp=2000-01-01T00:00:00Z&max_bytes=10")
        assert past.status_code == 200 and "1 records" in past.text
        page = client.get("/topics/bounded/messages?max_bytes=1000")
        assert page.status_code == 200
        assert len(page.text) < 20_000  # 100 kB key, 300 kB value and 100 kB header cut to 1000 bytes each
        assert "293.0 KiB" in page.text and page.text.count("97.7 KiB") == 2  # the value, the key and the header
        token = client.get("/topics/new").text.split('name="csrf_token" value="')[1].split('"')[0]
        response = client.post("/topics/new", data={"csrf_token": token, "name": "<b>x</b>", "partitions": "1"})
        assert response.status_code == 400 and "&lt;b&gt;x&lt;/b&gt;" in response.text
        big = client.post(
            "/topics/new",
            content=b"csrf_token=" + b"x" * 100_000,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert big.status_code == 413


def test_the_odradek_ui_command_serves_the_console(broker: BrokerRunner) -> None:
    port = free_port()
    command = [sys.executable, "-m", "odradek.cli.main", "ui", "--bootstrap-server", broker.bootstrap_servers]
    process = subprocess.Popen(
        [*command, "--listen", f"127.0.0.1:{port}", "--read-only"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/topics", timeout=5)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "odradek ui did not start"
                time.sleep(0.2)
        assert response.status_code == 200 and "read-only" in response.text
        assert 'data-topic="orders"' in response.text
    finally:
        process.terminate()
        process.wait(10)
    usage = subprocess.run([*command, "--listen", "nowhere"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 1 and "invalid --listen 'nowhere'" in usage.stderr


def test_transactions_page_shows_an_open_transaction(
    console: ConsoleServer, broker: BrokerRunner, admin: AdminClient, browser: WebDriver
) -> None:
    _create(admin, "txn-topic")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "console-txn"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("txn-topic", b"inside")
    producer.flush(15)
    url = console.url + "/transactions"
    _reload_until(browser, url, "#transactions tbody tr td:nth-child(4)", "Ongoing")
    assert text_of(browser, "#transactions tbody tr td:first-child") == "console-txn"
    producer.commit_transaction(15)
    _reload_until(browser, url, "#transactions tbody tr td:nth-child(4)", "CompleteCommit")

"""The console's pure parts: record rendering, sessions and CSRF, metrics parsing, ``odradek ui`` options."""

from __future__ import annotations

import argparse
import json

import pytest

from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.console import auth
from odradek.console.auth import SessionStore, check_csrf
from odradek.console.main import build_parser, config_from_args, parse_listen
from odradek.console.metrics import parse_totals
from odradek.console.render import config_source_name, human_bytes, show, timestamp_text
from odradek.errors import InvalidConfigError


def test_show_formats_and_bounds() -> None:
    assert show(None, "text", 10) is None
    shown = show(b"hello world", "text", 5)
    assert shown is not None and (shown.text, shown.truncated, shown.size) == ("hello", True, 11)
    hexed = show(bytes(range(20)), "hex", 100)
    assert hexed is not None and hexed.text.splitlines()[1] == "10 11 12 13"
    pretty = show(b'{"a":[1,2]}', "json", 100)
    assert pretty is not None and json.loads(pretty.text) == {"a": [1, 2]} and "\n" in pretty.text
    not_json = show(b"\xff<b>", "json", 100)
    assert not_json is not None and not_json.text == "\ufffd<b>"  # replaced, left for the template to escape
    deep = show(b"[" * 100000, "json", 200000)
    assert deep is not None and deep.text.startswith("[[[")


def test_sizes_and_timestamps() -> None:
    assert human_bytes(None) == "-"
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert config_source_name(1) == "DYNAMIC_TOPIC_CONFIG" and config_source_name(99) == "99"
    assert timestamp_text(-1) == "-"
    assert timestamp_text(0) == "1970-01-01T00:00:00.000+00:00"
    assert timestamp_text(2**62) == str(2**62)


def test_sessions_csrf_rotation_and_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    store = SessionStore(PLAINTEXT_SECURITY)
    session = store.create()
    assert store.get(session.token) is session and store.get("nope") is None and store.get(None) is None
    assert check_csrf(session, session.csrf)
    assert not check_csrf(session, session.csrf + "x") and not check_csrf(session, None)
    assert not check_csrf(session, store.create().csrf)
    old_token, old_csrf = session.token, session.csrf
    store.rotate(session)
    assert store.get(old_token) is None and store.get(session.token) is session and session.csrf != old_csrf
    store.drop(session)
    assert store.get(session.token) is None
    monkeypatch.setattr(auth, "MAX_SESSIONS", 3)
    small = SessionStore(PLAINTEXT_SECURITY)
    first = small.create()
    for _ in range(3):
        small.create()
    assert len(small) == 3 and small.get(first.token) is None
    monkeypatch.setattr(auth, "IDLE_TIMEOUT_S", -1.0)
    assert len(small.expired()) == 3 and len(small) == 0


def test_parse_totals_reads_all_topic_counters_only() -> None:
    text = (
        "# TYPE kafka_server_brokertopicmetrics_bytesin counter\n"
        "kafka_server_brokertopicmetrics_bytesin_total 1000.0\n"
        'kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 600.0\n'
        "# TYPE kafka_server_brokertopicmetrics_messagesin counter\n"
        "kafka_server_brokertopicmetrics_messagesin_total 7.0\n"
        "# TYPE other gauge\nother 3.0\n"
    )
    assert parse_totals(text) == {"bytesin": 1000.0, "messagesin": 7.0}


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--bootstrap-server", "b:9092", *argv])


def test_options(tmp_path: object) -> None:
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("8080", "host:", "host:99999", ":80"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    config = config_from_args(_args("--read-only", "--metrics-url", "http://b:1", "--metrics-url", "http://c:2"))
    assert config.read_only and not config.sign_in and config.metrics_urls == ["http://b:1", "http://c:2"]
    assert config.security == ClientSecurity()
    with pytest.raises(InvalidConfigError):
        config_from_args(_args("--sign-in", "scram"))


def test_scram_command_config_turns_sign_in_on(tmp_path: pytest.TempPathFactory) -> None:
    path = f"{tmp_path}/client.properties"
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n")
        f.write("sasl.username=c\nsasl.password=p\n")
    config = config_from_args(_args("--command-config", path))
    assert config.sign_in and config.security.sasl_mechanism == "SCRAM-SHA-512"
    assert not config_from_args(_args("--command-config", path, "--sign-in", "none")).sign_in

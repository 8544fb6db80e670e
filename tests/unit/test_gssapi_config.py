"""The GSSAPI JAAS entry and the listener's acceptor: every problem names its key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from odradek.errors import InvalidConfigError
from odradek.security.sasl.gssapi import KeytabLogin
from odradek.security.sasl.gssapi_config import gssapi_acceptor
from odradek.security.sasl.jaas import parse_single_login_module
from odradek.server.config import KafkaConfig
from odradek.server.listener_security import listener_securities

KEY = "listener.name.sasl_plaintext.gssapi.sasl.jaas.config"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def login(text: str) -> KeytabLogin:
    return KeytabLogin.from_jaas(parse_single_login_module(text, key=KEY), key=KEY)


def test_krb5_login_module_options() -> None:
    entry = login(
        f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/k.keytab" '
        'principal="kafka/b1@EXAMPLE.COM" serviceName="kafka" debug=true;'
    )
    assert entry == KeytabLogin("kafka/b1@EXAMPLE.COM", "/etc/k.keytab", "kafka")
    assert login(f'{KRB5} required useTicketCache=true principal="alice@EXAMPLE.COM";').keytab is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('org.apache.kafka.common.security.plain.PlainLoginModule required username="a";', "Krb5LoginModule expected"),
        (f'{KRB5} required useKeyTab=true principal="kafka/b1@EXAMPLE.COM";', 'needs keyTab="<path>"'),
    ],
)
def test_bad_entries_name_the_key(text: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=KEY.replace(".", r"\.")) as info:
        login(text)
    assert message in str(info.value)


def test_acceptor_problems_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidConfigError, match="No JAAS configuration for SASL/GSSAPI: set " + KEY.replace(".", r"\.")
    ):
        gssapi_acceptor(lambda key: ["DEFAULT"], None, jaas_key=KEY)
    with pytest.raises(InvalidConfigError, match=re.escape('GSSAPI needs principal="..."')):
        gssapi_acceptor(lambda key: ["DEFAULT"], f"{KRB5} required useKeyTab=false;", jaas_key=KEY)
    missing = tmp_path / "absent.keytab"
    text = f'{KRB5} required useKeyTab=true keyTab="{missing}" principal="kafka/b1@EXAMPLE.COM";'
    with pytest.raises(InvalidConfigError, match=re.escape("cannot use kafka/b1@EXAMPLE.COM from keytab")) as info:
        gssapi_acceptor(lambda key: ["DEFAULT"], text, jaas_key=KEY)
    assert KEY in str(info.value)
    with pytest.raises(InvalidConfigError, match=re.escape("sasl.kerberos.principal.to.local.rules")):
        gssapi_acceptor(lambda key: ["RULE:[1:$1]junk"], text, jaas_key=KEY)


def test_a_sasl_listener_with_gssapi_needs_its_jaas_entry() -> None:
    config = KafkaConfig({"listeners": "SASL_PLAINTEXT://:0", "sasl.enabled.mechanisms": "GSSAPI"})
    with pytest.raises(InvalidConfigError, match="No JAAS configuration for SASL/GSSAPI"):
        listener_securities(config, None)

"""Kerberos names and ``sasl.kerberos.principal.to.local.rules`` (Kafka's KerberosShortNamer)."""

from __future__ import annotations

import pytest

from odradek.errors import InvalidConfigError
from odradek.security.kerberos import KerberosName, KerberosShortNamer, NoMatchingRule, parse_rules

REALM = "EXAMPLE.COM"


def short(name: str, *rules: str) -> str:
    return KerberosShortNamer.from_config(list(rules) or None, REALM).short_name(KerberosName.parse(name))


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("alice@EXAMPLE.COM", ("alice", None, "EXAMPLE.COM")),
        ("kafka/broker1.example.com@EXAMPLE.COM", ("kafka", "broker1.example.com", "EXAMPLE.COM")),
        ("kafka/127.0.0.1", ("kafka", "127.0.0.1", None)),
        ("bob", ("bob", None, None)),
    ],
)
def test_names_parse_and_print_back(text: str, parts: tuple[str, str | None, str | None]) -> None:
    name = KerberosName.parse(text)
    assert (name.service_name, name.host_name, name.realm) == parts
    assert str(name) == text


@pytest.mark.parametrize("text", ["a/b/c@R", "@R", "a@b@R", "alice@"])
def test_malformed_names_with_a_realm_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Malformed Kerberos name"):
        KerberosName.parse(text)


def test_default_keeps_the_first_component_in_the_default_realm_only() -> None:
    assert short("alice@EXAMPLE.COM") == "alice"
    assert short("kafka/broker1@EXAMPLE.COM") == "kafka"
    assert short("bob") == "bob"
    with pytest.raises(NoMatchingRule, match=r"No rules apply to alice@OTHER.COM, rules \[DEFAULT\]"):
        short("alice@OTHER.COM")


def test_rules_apply_in_order_by_component_count() -> None:
    rules = (
        "RULE:[1:$1@$0](.*@OTHER\\.COM)s/@.*//",
        "RULE:[2:$1/$2@$0](kafka/.*@EXAMPLE\\.COM)s/.*/broker/",
        "DEFAULT",
    )
    assert short("carol@OTHER.COM", *rules) == "carol"
    assert short("kafka/h1@EXAMPLE.COM", *rules) == "broker"
    assert short("zk/h1@EXAMPLE.COM", *rules) == "zk"  # the 2-component rule's regexp does not match
    assert short("dave@EXAMPLE.COM", *rules) == "dave"


def test_substitution_groups_global_flag_and_case() -> None:
    assert short("Ann.Lee@EXAMPLE.COM", "RULE:[1:$1](.*)s/\\./_/g") == "Ann_Lee"
    assert short("a.b.c@EXAMPLE.COM", "RULE:[1:$1]s/\\./_/") == "a_b.c"
    assert short("Ann@EXAMPLE.COM", "RULE:[1:$1]/L") == "ann"
    assert short("ann@EXAMPLE.COM", "RULE:[1:$1]/U") == "ANN"
    assert short("svc-app@EXAMPLE.COM", "RULE:[1:$1](svc-.*)s/svc-(.*)/$1-service/L") == "app-service"
    # Java's replaceAll reads "$12" as group 1 then "2" when there is no group 12
    assert short("app@EXAMPLE.COM", "RULE:[1:$1]s/(.*)/$12/") == "app2"


def test_a_non_simple_result_is_refused() -> None:
    with pytest.raises(NoMatchingRule, match=r"Non-simple name alice@EXAMPLE\.COM"):
        short("alice@EXAMPLE.COM", "RULE:[1:$1@$0]")


def test_a_parameter_out_of_range_is_refused() -> None:
    with pytest.raises(NoMatchingRule, match="index 2 from \\$2 is outside of the valid range 0 to 1"):
        short("alice@EXAMPLE.COM", "RULE:[1:$2]")


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("RULES:[1:$1]", "Invalid rule: RULES"),
        ("DEFAULT junk", "unmatched substring: ` junk`"),
        ("RULE:[1:$1](a(b)", "invalid regular expression"),
        ("RULE:[1:$1](a)junk", "unmatched substring: `junk`"),
        ("RULE:[:$1]", "no component count"),
        ("RULE:[1:$1]s/(/x/", "invalid regular expression"),
    ],
)
def test_bad_rules_name_the_key(rule: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"sasl\.kerberos\.principal\.to\.local\.rules") as info:
        parse_rules([rule], REALM)
    assert message in str(info.value)

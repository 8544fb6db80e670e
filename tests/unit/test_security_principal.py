"""KafkaPrincipal, the certificate subject as Java renders it, and ssl.principal.mapping.rules
(Kafka's own SslPrincipalMapperTest cases)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID, ObjectIdentifier

from odradek.errors import InvalidConfigError
from odradek.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    certificate_subject,
    distinguished_name,
    sasl_principal,
)

from . import security_support as certs


def test_kafka_principal_parse_and_str() -> None:
    alice = KafkaPrincipal.parse("User:alice")
    assert alice == KafkaPrincipal("User", "alice") and str(alice) == "User:alice"
    assert KafkaPrincipal.parse("User:CN=a:b").name == "CN=a:b"  # split at the first colon only
    assert KafkaPrincipal.parse("Group:") == KafkaPrincipal("Group", "")
    for bad in ("", "alice", None):
        with pytest.raises(ValueError, match="principalType:principalName"):
            KafkaPrincipal.parse(bad)
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert sasl_principal("bob") == KafkaPrincipal("User", "bob")


def der(*attributes: tuple[ObjectIdentifier, str]) -> bytes:
    return certs.name(*attributes).public_bytes()


def test_subject_rendered_as_java_rfc2253() -> None:
    assert certificate_subject(certs.client().cert.public_bytes(Encoding.DER)) == "CN=alice,OU=eng,O=Acme,C=US"
    assert (
        distinguished_name(der((NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Acme, Inc.")))
        == "O=Acme\\, Inc.,C=US"
    )
    # Java escapes = and # anywhere, and leading/trailing blanks
    assert distinguished_name(der((NameOID.COMMON_NAME, " a=b#c "))) == "CN=\\ a\\=b\\#c\\ "
    assert distinguished_name(der((NameOID.COMMON_NAME, 'x+y<z>;"q"\\'))) == 'CN=x\\+y\\<z\\>\\;\\"q\\"\\\\'
    # Attributes without an RFC 2253 keyword: the dotted OID and the DER value in lower-case hex
    assert (
        distinguished_name(der((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "alice")))
        == "CN=alice,1.2.840.113549.1.9.1=#16056140622e63"
    )
    assert distinguished_name(der((NameOID.DOMAIN_COMPONENT, "com"), (NameOID.USER_ID, "u1"))) == "UID=u1,DC=com"
    assert distinguished_name(der((NameOID.COMMON_NAME, "Zoë"))) == "CN=Zoë"


def test_malformed_subject() -> None:
    good = der((NameOID.COMMON_NAME, "alice"))
    for bad in (good[:-3], b"\x31\x00", b""):
        with pytest.raises(ValueError):
            distinguished_name(bad)


def test_multi_valued_rdn_joined_with_plus() -> None:
    from cryptography import x509

    rdn = x509.RelativeDistinguishedName(
        [x509.NameAttribute(NameOID.COMMON_NAME, "a"), x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "b")]
    )
    rendered = distinguished_name(x509.Name([rdn]).public_bytes())
    assert sorted(rendered.split("+")) == ["CN=a", "OU=b"]


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper(rules)


def test_ssl_principal_mapper() -> None:
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == expected


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_beyond_the_groups_are_literal() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4$12/")
    assert mapper.name("CN=a,OU=b,O=c") == "a@$4a2"


def test_no_matching_rule_and_anonymous() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        mapper.name("CN=x")
    assert mapper.principal(None) == ANONYMOUS
    assert SslPrincipalMapper().rules and str(SslPrincipalMapper()) == "[DEFAULT]"

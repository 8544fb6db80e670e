"""JAAS parsing, SASL/PLAIN and SASL/SCRAM state machines (RFC 7677's exchange, Kafka's messages)."""

from __future__ import annotations

import base64

import pytest

from odradek.errors import ErrorCode, InvalidConfigError
from odradek.security.sasl import IllegalSaslStateError, SaslAuthenticationError
from odradek.security.sasl.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
    parse_single_login_module,
    plain_users,
)
from odradek.security.sasl.plain import PlainSaslClient, PlainSaslServer
from odradek.security.sasl.scram import (
    MECHANISMS,
    ScramCredential,
    ScramSaslClient,
    ScramSaslServer,
    generate_credential,
    sasl_name,
    secure_random_string,
    username,
)

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)

# --- JAAS --------------------------------------------------------------------------------------


def test_plain_jaas_config() -> None:
    entry = parse_single_login_module(PLAIN_JAAS, expected_module=PLAIN_LOGIN_MODULE)
    assert entry.control_flag == "REQUIRED"
    assert entry.options["username"] == "admin" and entry.options["password"] == "admin-secret"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_scram_jaas_config_with_quotes_escapes_and_comments() -> None:
    text = (
        "/* broker */ org.apache.kafka.common.security.scram.ScramLoginModule Required\n"
        "  username='broker' // the inter-broker user\n"
        '  password="p\\"w\\\\d\\n\\101" tokenauth=false\n'
        '  empty="" ;'
    )
    entry = parse_single_login_module(text, expected_module=SCRAM_LOGIN_MODULE)
    assert entry.control_flag == "REQUIRED"
    assert entry.options == {"username": "broker", "password": 'p"w\\d\nA', "tokenauth": "false", "empty": ""}


def test_several_entries_and_repeated_options() -> None:
    entries = parse_jaas_config("a.A optional k=1 k=2; b.B sufficient;")
    assert [(e.login_module, e.control_flag, e.options) for e in entries] == [
        ("a.A", "OPTIONAL", {"k": "2"}),
        ("b.B", "SUFFICIENT", {}),
    ]
    with pytest.raises(InvalidConfigError, match="contains 2 login modules, should be 1 module"):
        parse_single_login_module("a.A optional; b.B optional;")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("   // only a comment", "Login module not specified in JAAS config"),
        ("org.Module", "Login module control flag not specified"),
        ("org.Module mandatory;", "Invalid login module control flag 'mandatory'"),
        ("org.Module required username", "Value not specified for key 'username'"),
        ("org.Module required username=;", "Value not specified for key 'username'"),
        ('org.Module required username="admin"', "not terminated by semi-colon"),
        ("org.Module required a=b c=d", "not terminated by semi-colon"),
        (";", "Invalid empty LoginModule name"),
    ],
)
def test_malformed_jaas(text: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message) as error:
        parse_jaas_config(text, key="listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert "listener.name.sasl_ssl.plain.sasl.jaas.config" in str(error.value)


def test_wrong_login_module_named() -> None:
    with pytest.raises(InvalidConfigError, match="PlainLoginModule"):
        parse_single_login_module(PLAIN_JAAS, expected_module=SCRAM_LOGIN_MODULE)


# --- PLAIN -------------------------------------------------------------------------------------


def plain_server() -> PlainSaslServer:
    return PlainSaslServer.from_jaas(parse_single_login_module(PLAIN_JAAS))


def test_plain_good_password() -> None:
    server = plain_server()
    client = PlainSaslClient("alice", "alice-secret")
    assert client.evaluate_challenge(b"") == b"\x00alice\x00alice-secret"
    assert server.evaluate_response(b"\x00alice\x00alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    assert client.complete
    with pytest.raises(IllegalSaslStateError):
        server.evaluate_response(b"\x00alice\x00alice-secret")
    authzid = plain_server()
    authzid.evaluate_response(b"alice\x00alice\x00alice-secret")
    assert authzid.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "message", "public"),
    [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password", True),
        (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password", True),
        (
            b"admin\x00alice\x00alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
            True,
        ),
        (b"\x00\x00pw", "Authentication failed: username not specified", False),
        (b"\x00alice\x00", "Authentication failed: password not specified", False),
        (b"garbage without separators", "Authentication failed: username not specified", False),
        (b"\x00alice", "Authentication failed: password not specified", False),
        (b"", "Authentication failed: username not specified", False),
    ],
)
def test_plain_failures(token: bytes, message: str, public: bool) -> None:
    server = plain_server()
    with pytest.raises(SaslAuthenticationError) as error:
        server.evaluate_response(token)
    assert str(error.value) == message
    assert error.value.error_code == ErrorCode.sasl_authentication_failed
    assert error.value.public is public
    expected_client = (
        message
        if public
        else "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
    )
    assert error.value.client_message() == expected_client
    assert not server.complete
    with pytest.raises(IllegalSaslStateError, match="not completed"):
        _ = server.authorization_id


def test_plain_ignores_what_follows_a_third_nul() -> None:
    server = plain_server()
    server.evaluate_response(b"\x00alice\x00alice-secret\x00trailing")
    assert server.authorization_id == "alice"


# --- SCRAM -------------------------------------------------------------------------------------

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc7677_server() -> ScramSaslServer:
    credential = generate_credential("SCRAM-SHA-256", "pencil", 4096, RFC7677_SALT)
    return ScramSaslServer("SCRAM-SHA-256", {"user": credential}, nonce=lambda: RFC7677_SERVER_NONCE)


def test_rfc7677_scram_sha_256_exchange() -> None:
    server = rfc7677_server()
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_CLIENT_NONCE)
    client_first = client.evaluate_challenge(b"")
    assert client_first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate_response(client_first)
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.evaluate_challenge(server_first)
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = server.evaluate_response(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert client.evaluate_challenge(server_final) is None
    assert client.complete and server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_with_random_nonces_and_salt(mechanism: str) -> None:
    users = {"a=b,c": generate_credential(mechanism, "s3cret")}
    server = ScramSaslServer(mechanism, users)
    client = ScramSaslClient(mechanism, "a=b,c", "s3cret")
    token = client.evaluate_challenge(b"")
    assert token is not None and b"n=a=3Db=2Cc," in token
    while not server.complete:
        assert token is not None
        token = client.evaluate_challenge(server.evaluate_response(token))
    assert token is None and client.complete
    assert server.authorization_id == "a=b,c"


def scram_exchange_until_final(password: str) -> tuple[ScramSaslServer, bytes]:
    server = rfc7677_server()
    client = ScramSaslClient("SCRAM-SHA-256", "user", password, nonce=lambda: RFC7677_CLIENT_NONCE)
    first = client.evaluate_challenge(b"")
    assert first is not None
    final = client.evaluate_challenge(server.evaluate_response(first))
    assert final is not None
    return server, final


def expect_generic_failure(server: ScramSaslServer, token: bytes, message: str) -> None:
    with pytest.raises(SaslAuthenticationError) as error:
        server.evaluate_response(token)
    assert message in str(error.value)
    assert error.value.client_message() == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )
    assert server.state == "FAILED" and not server.complete
    with pytest.raises(IllegalSaslStateError, match="Unexpected challenge in Sasl server state FAILED"):
        server.evaluate_response(token)


def test_scram_wrong_password() -> None:
    server, final = scram_exchange_until_final("crayon")
    expect_generic_failure(server, final, "Invalid client credentials")


def test_scram_tampered_nonce_and_channel_binding() -> None:
    server, final = scram_exchange_until_final("pencil")
    expect_generic_failure(server, final.replace(b"rOprNG", b"rOprNH"), "Invalid client nonce")
    server, final = scram_exchange_until_final("pencil")
    expect_generic_failure(server, final.replace(b"c=biws", b"c=eSws"), "Invalid channel binding")
    server, final = scram_exchange_until_final("pencil")
    expect_generic_failure(server, final[:-8] + b"AAAAAAA=", "Invalid client credentials")


def client_final_with_nonce(password: str, nonce: str) -> tuple[ScramSaslServer, bytes]:
    """An RFC 7677 exchange whose final message carries ``nonce``, with a proof over it (as
    librdkafka computes its proof over the final message it sends)."""
    server = rfc7677_server()
    client_first_bare = f"n=user,r={RFC7677_CLIENT_NONCE}"
    server_first = server.evaluate_response(f"n,,{client_first_bare}".encode()).decode()
    mech = MECHANISMS["SCRAM-SHA-256"]
    without_proof = f"c=biws,r={nonce}"
    client_key = mech.client_key(mech.salted_password(password, RFC7677_SALT, 4096))
    signature = mech.hmac(mech.hash(client_key), f"{client_first_bare},{server_first},{without_proof}".encode())
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return server, f"{without_proof},p={proof}".encode()


def test_scram_final_nonce_ending_with_the_combined_nonce_is_accepted_as_kafka_3_9() -> None:
    """librdkafka < 2.6.1 repeats its client nonce in front of the combined one; Kafka 3.9 accepts."""
    combined = RFC7677_CLIENT_NONCE + RFC7677_SERVER_NONCE
    server, final = client_final_with_nonce("pencil", RFC7677_CLIENT_NONCE + combined)
    assert server.evaluate_response(final).startswith(b"v=")
    assert server.complete and server.authorization_id == "user"
    server, final = client_final_with_nonce("pencil", combined)
    assert server.evaluate_response(final).startswith(b"v=") and server.complete
    server, final = client_final_with_nonce("crayon", RFC7677_CLIENT_NONCE + combined)
    expect_generic_failure(server, final, "Invalid client credentials")


@pytest.mark.parametrize(
    "nonce",
    [
        RFC7677_CLIENT_NONCE,  # the client's part only
        RFC7677_CLIENT_NONCE + RFC7677_SERVER_NONCE[:-1],  # cut short
        RFC7677_CLIENT_NONCE + RFC7677_SERVER_NONCE + "x",  # something after the combined nonce
        RFC7677_SERVER_NONCE,  # the server's part only
        "abc" + RFC7677_SERVER_NONCE,  # another client nonce in front of the server's
    ],
)
def test_scram_final_nonce_not_ending_with_the_combined_nonce_is_refused(nonce: str) -> None:
    server, final = client_final_with_nonce("pencil", nonce)
    expect_generic_failure(server, final, "Invalid client nonce in the final client message.")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"n,,n=nobody,r=abc", "Invalid user credentials"),
        (b"y,,n=user,r=abc", "Invalid SCRAM client first message format"),
        (b"p=tls-unique,,n=user,r=abc", "Invalid SCRAM client first message format"),
        (b"n,,n=user", "Invalid SCRAM client first message format"),
        (b"n,,n=us=er,r=abc", "Invalid SCRAM client first message format"),
        (b"n,,n=user,r=abc,tokenauth=true", "Token Authentication failed: Invalid tokenId : user"),
        (b"c=biws,r=abc,p=AAAA", "Invalid SCRAM client first message format"),
    ],
)
def test_scram_bad_client_first(token: bytes, message: str) -> None:
    expect_generic_failure(rfc7677_server(), token, message)


def test_scram_authzid_other_than_user_is_told_to_the_client() -> None:
    server = rfc7677_server()
    with pytest.raises(SaslAuthenticationError) as error:
        server.evaluate_response(b"n,a=admin,n=user,r=abc")
    assert error.value.public
    assert error.value.client_message() == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    same = rfc7677_server()
    assert same.evaluate_response(b"n,a=user,n=user,r=abc,ext=ignored").startswith(b"r=abc")


def test_scram_out_of_order_messages() -> None:
    server = rfc7677_server()
    expect_generic_failure(server, b"c=biws,r=x,p=AAAA", "Invalid SCRAM client first message format")
    done = rfc7677_server()
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil")
    token = client.evaluate_challenge(b"")
    while not done.complete:
        assert token is not None
        token = client.evaluate_challenge(done.evaluate_response(token))
    with pytest.raises(IllegalSaslStateError, match="state COMPLETE"):
        done.evaluate_response(b"n,,n=user,r=abc")
    with pytest.raises(IllegalSaslStateError, match="client state COMPLETE"):
        client.evaluate_challenge(b"v=AAAA")
    fresh = ScramSaslClient("SCRAM-SHA-256", "user", "pencil")
    with pytest.raises(SaslAuthenticationError, match="Expected empty challenge"):
        fresh.evaluate_challenge(b"r=abc,s=AAAA,i=4096")


def test_scram_low_iterations_refused_on_both_sides() -> None:
    weak = ScramCredential(b"salt", b"k" * 32, b"s" * 32, 1000)
    expect_generic_failure(
        ScramSaslServer("SCRAM-SHA-256", {"user": weak}), b"n,,n=user,r=abc", "Iterations 1000 is less than the minimum"
    )
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: "abc")
    client.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError, match="Requested iterations 1000 is less than the minimum 4096"):
        client.evaluate_challenge(b"r=abcdef,s=c2FsdA==,i=1000")
    with pytest.raises(ValueError, match="Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-512"):
        generate_credential("SCRAM-SHA-512", "pw", 100)


def test_scram_client_checks_the_server() -> None:
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_CLIENT_NONCE)
    client.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError, match="does not start with client nonce"):
        client.evaluate_challenge(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    server = rfc7677_server()
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_CLIENT_NONCE)
    final = client.evaluate_challenge(server.evaluate_response(client.evaluate_challenge(b"") or b""))
    server.evaluate_response(final or b"")
    with pytest.raises(SaslAuthenticationError, match="Invalid server signature"):
        client.evaluate_challenge(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    errored = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_CLIENT_NONCE)
    errored.evaluate_challenge(b"")
    errored.evaluate_challenge(b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslAuthenticationError, match="failed with error: invalid-proof"):
        errored.evaluate_challenge(b"e=invalid-proof")


def test_credential_string_round_trip() -> None:
    text = (
        "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,"
        "server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,iterations=4096"
    )
    credential = ScramCredential.from_string(text)
    assert credential == generate_credential("SCRAM-SHA-256", "pencil", 4096, RFC7677_SALT)
    assert credential.to_string() == text
    assert ScramCredential.from_string(text + ",") == credential  # Java's split drops a trailing empty token
    for bad in ("", "salt=AA==", text.replace("iterations=4096", "iterations=many"), text + ",extra=1", "=x," + text):
        with pytest.raises(ValueError, match="Credentials not valid"):
            ScramCredential.from_string(bad)


def test_kafka_salts_nonces_and_sasl_names() -> None:
    salt = generate_credential("SCRAM-SHA-512", "pw").salt
    assert (salt.decode().isalnum() and salt.decode().islower()) or salt.decode().isdigit()
    assert len(secure_random_string()) <= 26
    assert secure_random_string() != secure_random_string()
    assert sasl_name("a=b,c") == "a=3Db=2Cc" and username("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(ValueError, match="Invalid username"):
        username("a=b")

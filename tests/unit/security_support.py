"""Certificates made at test time (a CA, a server certificate for localhost/127.0.0.1, clients)
and a TLS handshake between two ``ssl.SSLObject`` over memory BIOs, with no sockets."""

from __future__ import annotations

import datetime
import functools
import ipaddress
import ssl
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Identity:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def key_pem(self, password: str | None = None) -> str:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        ).decode()

    def pkcs12(self, password: str, ca: Identity | None = None) -> bytes:
        cas = [ca.cert] if ca else None
        return pkcs12.serialize_key_and_certificates(
            b"kafka", self.key, self.cert, cas, serialization.BestAvailableEncryption(password.encode())
        )


def name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


def _issue(
    subject: x509.Name, issuer: Identity | None, *, ca: bool = False, sans: list[x509.GeneralName] | None = None
) -> Identity:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        assert issuer is not None
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()), critical=False
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Identity(key, builder.sign(issuer.key if issuer else key, hashes.SHA256()))


@functools.cache
def ca() -> Identity:
    return _issue(name((NameOID.COMMON_NAME, "odradek test CA")), None, ca=True)


@functools.cache
def other_ca() -> Identity:
    return _issue(name((NameOID.COMMON_NAME, "another CA")), None, ca=True)


@functools.cache
def server() -> Identity:
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    return _issue(name((NameOID.COMMON_NAME, "broker-1")), ca(), sans=sans)


@functools.cache
def client(common_name: str = "alice") -> Identity:
    subject = name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.ORGANIZATION_NAME, "Acme"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        (NameOID.COMMON_NAME, common_name),
    )
    return _issue(subject, ca())


def handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_hostname: str | None = "localhost"
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake between a server and a client context over memory BIOs, then one
    application record each way (TLS 1.3 reports a refused client certificate only then).
    SSL errors of either side propagate."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    srv = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    cli = client_ctx.wrap_bio(c_in, c_out, server_side=False, server_hostname=server_hostname)
    done = {"server": False, "client": False}
    for _ in range(10):
        for label, obj in (("client", cli), ("server", srv)):
            if not done[label]:
                try:
                    obj.do_handshake()
                    done[label] = True
                except ssl.SSLWantReadError:
                    pass
            s_in.write(c_out.read())
            c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values()), done
    cli.write(b"ping")
    s_in.write(c_out.read())
    assert srv.read(4) == b"ping"
    srv.write(b"pong")
    c_in.write(s_out.read())
    assert cli.read(4) == b"pong"
    return srv, cli


def server_signed_by(issuer: Identity) -> Identity:
    """A broker certificate with :func:`server`'s subject and names, issued by ``issuer`` (a
    rotated key store: Kafka refuses a new certificate whose subject or names differ)."""
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    return _issue(server().cert.subject, issuer, sans=sans)

"""The schema registry with SASL on the cluster: HTTP Basic credentials checked by a SCRAM login
against the broker, writes only for ``schema.registry.writers``, served over TLS."""

from __future__ import annotations

import pathlib
import ssl
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from tests.integration.schema_registry_support import avro_record, call
from tests.integration.security_support import address, secure_broker, write_certificates

from odradek.client.security import ClientSecurity
from odradek.schema_registry.server import RegistryConfig, RegistryServer
from odradek.server.runner import BrokerRunner

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("sr-certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]) -> Iterator[BrokerRunner]:
    with secure_broker(str(tmp_path_factory.mktemp("sr-secure")), paths) as runner:
        yield runner


@pytest.fixture(scope="module")
def registry(broker: BrokerRunner, paths: dict[str, str]) -> Iterator[RegistryServer]:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    config = RegistryConfig.from_properties(
        {
            "schema.registry.ssl.certificate.location": paths["server"],
            "schema.registry.writers": "User:admin",
        },
        bootstrap_servers=address(broker, "SASL_PLAINTEXT"),
        listener="https://127.0.0.1:0",
        security=security,
    )
    assert config.authentication == "BASIC"  # the default once the cluster uses SASL
    server = RegistryServer(config).start()
    try:
        yield server
    finally:
        server.stop()


def test_credentials_are_required_and_checked(registry: RegistryServer, paths: dict[str, str]) -> None:
    url, ca = registry.url, ssl.create_default_context(cafile=paths["ca"])
    answer = httpx.get(url + "/subjects", verify=ca)
    assert answer.status_code == 401 and answer.json()["error_code"] == 40101
    assert answer.headers["www-authenticate"].startswith("Basic")
    assert call(url, "GET", "/subjects", auth=("scram-user", "wrong"), verify=ca)[0] == 401
    assert call(url, "GET", "/subjects", auth=("nobody", "x"), verify=ca)[0] == 401
    assert call(url, "GET", "/subjects", auth=("scram-user", "scram-secret"), verify=ca) == (200, [])
    status, body = call(url, "GET", "/subjects", headers={"Authorization": "Basic !!!"}, verify=ca)
    assert (status, body["error_code"]) == (401, 40101)


def test_only_writers_change_anything(registry: RegistryServer, paths: dict[str, str]) -> None:
    url, ca = registry.url, ssl.create_default_context(cafile=paths["ca"])
    schema = {"schema": avro_record("W", [{"name": "a", "type": "int"}])}
    status, body = call(url, "POST", "/subjects/w/versions", schema, auth=("scram-user", "scram-secret"), verify=ca)
    assert (status, body["error_code"]) == (403, 40301)
    status, body = call(
        url, "PUT", "/config", {"compatibility": "NONE"}, auth=("scram-user", "scram-secret"), verify=ca
    )
    assert status == 403
    status, body = call(url, "POST", "/subjects/w/versions", schema, auth=("admin", "admin-secret"), verify=ca)
    assert status == 200 and body["id"] >= 1
    # readers may look up and test compatibility, which change nothing
    assert call(url, "POST", "/subjects/w", schema, auth=("scram-user", "scram-secret"), verify=ca)[0] == 200
    with SchemaRegistryClient(
        {"url": url, "basic.auth.user.info": "admin:admin-secret", "ssl.ca.location": paths["ca"]}
    ) as client:  # closed: its pooled TLS connections are not left to the garbage collector
        assert client.register_schema("w2", Schema(schema["schema"], "AVRO")) == body["id"]
    with SchemaRegistryClient(
        {"url": url, "basic.auth.user.info": "scram-user:scram-secret", "ssl.ca.location": paths["ca"]}
    ) as reader:
        assert reader.get_latest_version("w2").schema_id == body["id"]
        with pytest.raises(SchemaRegistryError) as info:
            reader.delete_subject("w2")
    assert info.value.http_status_code == 403


def test_tls_only(registry: RegistryServer, paths: dict[str, str]) -> None:
    assert registry.url.startswith("https://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(registry.url.replace("https://", "http://") + "/subjects", timeout=5)
    with pytest.raises(httpx.HTTPError):  # a client that does not trust the CA
        httpx.get(registry.url + "/subjects", timeout=5)
    assert pathlib.Path(paths["server"]).exists()


def test_broker_hosted_registry_checks_credentials_on_its_sasl_listener(
    tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]
) -> None:
    # the inter-broker listener is PLAINTEXT; the cluster's SASL listeners still guard the registry
    extra = {"schema.registry.listener": "http://127.0.0.1:0", "schema.registry.writers": "admin"}
    with secure_broker(str(tmp_path_factory.mktemp("sr-hosted")), paths, **extra) as runner:
        assert runner.broker is not None and runner.broker.schema_registry is not None
        url = runner.broker.schema_registry.url
        assert call(url, "GET", "/subjects")[0] == 401
        assert call(url, "GET", "/subjects", auth=("scram-user", "scram-secret")) == (200, [])
        schema = {"schema": avro_record("H", [])}
        assert call(url, "POST", "/subjects/h/versions", schema, auth=("scram-user", "scram-secret"))[0] == 403
        assert call(url, "POST", "/subjects/h/versions", schema, auth=("admin", "admin-secret"))[0] == 200

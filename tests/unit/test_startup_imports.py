"""What ``odradek broker`` loads before it serves: a broker without a feature never imports it.

A fresh interpreter imports exactly what the command does for a plain PLAINTEXT broker
(``odradek.cli.main`` dispatches to ``odradek.cli.broker``, whose ``_serve`` imports
``odradek.server.broker``) and lists ``sys.modules``. hypothesis (pulled in by kio's phantom types
when installed), PyJWT and the OAUTHBEARER modules, gssapi, cryptography (key stores, password
encoders), the schema registry, the web console, the OIDC test server and the admin client (the
metrics ask other brokers for high watermarks with it, on a scrape) cost start-up time and must
stay out; so must the inter-broker message classes, built per version on first use, and the
request handlers (each imports kio's classes of the versions it serves), imported on their API's
first request: ApiVersions answers from a static version table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import odradek

SRC = str(Path(odradek.__file__).resolve().parent.parent)

_PROBE = """
import json, sys
import odradek.cli.main, odradek.cli.broker, odradek.server.broker
print(json.dumps(sorted(sys.modules)))
"""

FORBIDDEN_PREFIXES = (
    "hypothesis",
    "jwt",
    "cryptography",
    "gssapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "odradek.schema_registry",
    "odradek.console",
    "odradek.testing_oidc",
    "odradek.security.sasl.oauthbearer",
    "odradek.security.sasl.gssapi",
    "odradek.security.tls_stores",
    "odradek.security.password_encoder",
    "odradek.protocol.inter_broker_messages.",
    "odradek.client.admin",
    "kio.schema.describe_acls",
    "kio.schema.create_delegation_token",
    "kio.schema.fetch",
    "kio.schema.metadata",
    "kio.schema.join_group",
)

HANDLERS_LOADED_AT_START = {"odradek.server.apis", "odradek.server.apis.api_versions"}
"""The request handler imports the registry and ApiVersions (its unsupported-version answer is
built without a request); every other handler module waits for its API's first request."""


def _broker_modules() -> list[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    modules: list[str] = json.loads(out)
    return modules


def test_plain_broker_start_loads_no_optional_feature() -> None:
    modules = _broker_modules()
    assert "odradek.server.broker" in modules  # the probe imported what a broker runs
    assert "kio.static._phantom" in modules
    loaded = sorted(m for m in modules if m.startswith(FORBIDDEN_PREFIXES) or m.split(".")[0] in FORBIDDEN_PREFIXES)
    assert loaded == []


def test_plain_broker_start_imports_no_request_handler() -> None:
    modules = _broker_modules()
    assert "odradek.server.request_handler" in modules
    handlers = {m for m in modules if m.startswith("odradek.server.apis")}
    assert handlers == HANDLERS_LOADED_AT_START
    # kio's generated classes: the error codes, headers and type aliases only, no API's messages
    schemas = sorted(m.split(".")[2] for m in modules if m.startswith("kio.schema."))
    assert set(schemas) <= {"errors", "index", "request_header", "response_header", "types"}, schemas


_HANDLERS_PROBE = """
import json, sys
import odradek.cli.main, odradek.cli.broker, odradek.server.broker
from odradek.server.apis import all_handlers
handlers = all_handlers()
print(json.dumps([len(handlers), sorted(sys.modules)]))
"""


def test_handlers_read_requests_by_version_number() -> None:
    """Importing every handler loads no API's kio classes: a handler reads its request by version
    number, and the codec loads only the versions clients use (type-only imports stay under
    ``TYPE_CHECKING``)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", _HANDLERS_PROBE], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    count, modules = json.loads(out)
    assert count >= 70
    assert "odradek.server.apis.describe_acls" in modules and "odradek.server.apis.fetch" in modules
    schemas = sorted({m.split(".")[2] for m in modules if m.startswith("kio.schema.")})
    assert set(schemas) <= {"errors", "index", "request_header", "response_header", "types"}, schemas


def test_hypothesis_hidden_only_while_kio_loads() -> None:
    """After the broker's imports, hypothesis still imports normally (nothing left blocked)."""
    probe = "import odradek.cli.broker, sys; import hypothesis.strategies; print(sys.modules['hypothesis'] is not None)"
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True"

"""Record kafka-python's request frames over SASL_PLAINTEXT connections authenticated with GSSAPI.

Run from the repository root:

    .venv/bin/python tools/record_gssapi_traffic.py

A throwaway MIT KDC (:class:`odradek.testing_kdc.KerberosKdc`, realm ``ODRADEK.TEST``) with the
principals ``kafka/127.0.0.1`` (the broker's keytab) and ``alice`` (the client's, used through
``KRB5_CLIENT_KTNAME``); a broker whose clients' listener, advertised on the recording proxy's
port, is SASL_PLAINTEXT with GSSAPI; kafka-python's workload of ``tools/record_sasl_traffic.py``
(metadata, create a topic, produce, consume in a group, commit). Each recorded connection starts
with SaslHandshake v1 and SaslAuthenticate frames carrying the GSS tokens: the AP-REQ, the empty
token after the AP-REP, and the wrapped security-layer answer. The tokens name a realm that is gone
once the tool exits: they are seeds for the fuzzer's mutations, not credentials. Output:
``tests/data/client_frames_sasl/kafka_python_gssapi.bin``, and that folder's ``README.md``.
"""

from __future__ import annotations

import logging
import os
import pathlib
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from record_sasl_traffic import (  # the sibling tools, imported from their folder
    DEFAULT_OUT,
    finish_recording,
    kafka_python_workload,
    sasl_broker_config,
    sasl_summary,
)
from record_traffic import HOST, MAX_FILE_BYTES, RecordingProxy, bound_port, render_summary, write_corpus

from odradek.server.runner import BrokerRunner
from odradek.testing_kdc import KerberosKdc

OUT_NAME = "kafka_python_gssapi.bin"

log = logging.getLogger("record_gssapi_traffic")


def run_kafka_python_gssapi(bootstrap: str) -> None:
    sasl: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
    }
    kafka_python_workload(sasl, "kafka-python-gssapi-data", "kafka-python-gssapi-group")


def record(out_dir: pathlib.Path, max_bytes: int) -> None:
    with KerberosKdc() as kdc, tempfile.TemporaryDirectory(prefix="odradek-record-gssapi-") as data_dir:
        assert kdc.base_dir is not None
        kdc.add_principal("kafka/127.0.0.1", "alice")
        broker_keytab = kdc.keytab(kdc.base_dir / "kafka.keytab", ["kafka/127.0.0.1"])
        os.environ.update(kdc.client_environ(kdc.keytab(kdc.base_dir / "alice.keytab", ["alice"]), "alice"))
        proxy = RecordingProxy()
        proxy_port = proxy.start()
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{broker_keytab}" principal="kafka/127.0.0.1@{kdc.realm}";'
        )
        runner = BrokerRunner(
            data_dir, sasl_broker_config(proxy_port, "GSSAPI", "listener.name.sasl_plaintext.gssapi", jaas)
        )
        try:
            runner.start()
            proxy.upstream = (HOST, bound_port(runner))
            proxy.label = "kafka_python_gssapi"
            run_kafka_python_gssapi(f"{HOST}:{proxy_port}")
            conns, frames = finish_recording(proxy, "kafka_python_gssapi", "after", max_bytes)
            if not frames:
                raise RuntimeError("no frames recorded")
            write_corpus(out_dir / OUT_NAME, frames)
            log.info("%d connections, %d frames kept", len(conns), len(frames))
        finally:
            runner.stop()
            proxy.stop()
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("odradek", "kafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    out_dir = pathlib.Path(argv[0]) if argv else DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    record(out_dir, MAX_FILE_BYTES // 4)
    summary = sasl_summary(render_summary(out_dir))
    (out_dir / "README.md").write_text(summary)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Authentication cost per SASL mechanism: connections per second, PLAINTEXT as the baseline.

One odradek broker process (``bench/common.py``) with a PLAINTEXT listener and a SASL_PLAINTEXT
listener serving PLAIN (JAAS users), SCRAM-SHA-256 and SCRAM-SHA-512 (a user created with
``odradek configs --bootstrap-server``, 4096 iterations) and GSSAPI (a throwaway MIT KDC on
127.0.0.1, :class:`odradek.testing_kdc.KerberosKdc`, the broker's keytab for
``kafka/127.0.0.1``). For each, ``--connections`` connections (default 300) are opened one after
the other with odradek's own client and closed: TCP connect, ApiVersions, then SaslHandshake v1 and
SaslAuthenticate until the session is established. ``connections_per_s`` is their number over
the elapsed time of the best of ``--rounds`` rounds (default 3, the mechanisms taking turns);
``ms_per_connection`` its inverse. Client and broker share the machine, so each
figure is the whole login's cost: SCRAM's client derives its salted password (PBKDF2, 4096
iterations) on every login; GSSAPI's client reuses its service ticket (fetched from the KDC
on the first login only), and the broker decrypts it with the keytab's key and records the
authenticator in MIT krb5's replay cache.

One JSON document goes to stdout.

    python bench/sasl_connect_bench.py [--connections 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import time
from typing import Any

from common import OdradekBroker, free_port, log, machine_info
from odradek.cli.main import main as odradek
from odradek.client.connection import KafkaConnection
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.testing_kdc import KerberosKdc

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


async def connect_many(port: int, security: ClientSecurity, count: int) -> float:
    """Seconds to open (and authenticate) then close ``count`` connections one after the other."""
    start = time.perf_counter()
    for _ in range(count):
        connection = KafkaConnection("127.0.0.1", port, request_timeout_ms=10000, security=security)
        await connection.connect()
        await connection.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="each mechanism's best round is kept")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with KerberosKdc() as kdc:
        assert kdc.base_dir is not None
        kdc.add_principal("kafka/127.0.0.1", "bench")
        broker_keytab = kdc.keytab(kdc.base_dir / "kafka.keytab", ["kafka/127.0.0.1"])
        client_keytab = kdc.keytab(kdc.base_dir / "bench.keytab", ["bench"])
        os.environ.update(kdc.environ)  # the broker process inherits the realm's krb5.conf
        plain_port, sasl_port = free_port(), free_port()
        overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,GSSAPI",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{broker_keytab}" principal="kafka/127.0.0.1@{kdc.realm}";'
            ),
            "connection.failed.authentication.delay.ms": "0",
        }
        securities: dict[str, tuple[int, ClientSecurity]] = {"PLAINTEXT": (plain_port, PLAINTEXT_SECURITY)}
        sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "bench", "sasl.password": "bench-secret"}
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            securities[mechanism] = (sasl_port, ClientSecurity.from_properties({**sasl, "sasl.mechanism": mechanism}))
        securities["GSSAPI"] = (
            sasl_port,
            ClientSecurity.from_properties(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "GSSAPI",
                    "sasl.kerberos.service.name": "kafka",
                    "sasl.kerberos.keytab": str(client_keytab),
                    "sasl.kerberos.principal": f"bench@{kdc.realm}",
                }
            ),
        )
        with OdradekBroker(overrides=overrides, port=plain_port).start():
            scram = "SCRAM-SHA-256=[iterations=4096,password=bench-secret],SCRAM-SHA-512=[password=bench-secret]"
            with contextlib.redirect_stdout(io.StringIO()):
                argv = ["configs", "--bootstrap-server", f"127.0.0.1:{plain_port}", "--alter", "--add-config", scram]
                code = odradek([*argv, "--entity-type", "users", "--entity-name", "bench"])
            assert code == 0, "could not create the SCRAM user"
            time.sleep(1.0)  # the credential cache follows /config/changes
            for port, security in securities.values():
                asyncio.run(connect_many(port, security, 3))  # warm-up (GSSAPI: the TGT and service ticket)
            best: dict[str, float] = {}
            for round_ in range(args.rounds):
                for name, (port, security) in securities.items():
                    log(f"round {round_ + 1}: {name}: {args.connections} connections")
                    seconds = asyncio.run(connect_many(port, security, args.connections))
                    best[name] = min(best.get(name, seconds), seconds)
            for name, seconds in best.items():
                results[name] = {
                    "connections_per_s": args.connections / seconds,
                    "ms_per_connection": seconds * 1000 / args.connections,
                }
    document = {
        "benchmark": "sasl_connect",
        "connections": args.connections,
        "results": results,
        "machine": machine_info(),
    }
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()

"""``odradek schema-registry``: run a Schema Registry beside any Kafka-compatible cluster.

    odradek schema-registry --bootstrap-server HOST:PORT --listen HOST:PORT
        [--zookeeper HOST:PORT/chroot] [--command-config FILE]

``--listen`` takes ``HOST:PORT`` or a URL (``https://HOST:PORT`` needs
``schema.registry.ssl.certificate.location`` in the command config). ``--command-config`` holds
the Kafka client's security keys (``security.protocol``, ``sasl.*``, ``ssl.*``) and the
``schema.registry.*`` keys (see :mod:`odradek.schema_registry.server`). With ``--zookeeper`` the
instances elect one writer through ZooKeeper; without it this instance writes itself. Runs until
SIGINT or SIGTERM; exit status 1 when it cannot start.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from odradek.client.security import ClientSecurity, read_properties_file


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="odradek schema-registry", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the cluster")
    parser.add_argument("--listen", required=True, help="HOST:PORT or http(s)://HOST:PORT to serve the REST API on")
    parser.add_argument("--zookeeper", help="ZooKeeper connect string for leader election among instances")
    parser.add_argument("--command-config", help="properties file: client security and schema.registry.* keys")
    args = parser.parse_args(argv)
    from odradek.schema_registry.server import RegistryConfig, RegistryServer

    security: ClientSecurity | None = None
    try:
        props = read_properties_file(args.command_config) if args.command_config else {}
        security = ClientSecurity.from_properties(props)
        config = RegistryConfig.from_properties(
            props,
            bootstrap_servers=args.bootstrap_server,
            listener=args.listen,
            zookeeper_connect=args.zookeeper,
            security=security,
        )
        server = RegistryServer(config).start()
    except Exception as e:  # bad config, unreachable cluster, unusable _schemas: one line, status 1
        print(f"odradek schema-registry: {e or type(e).__name__}", file=sys.stderr)
        if security is not None:
            security.close()
        return 1
    print(f"schema registry listening on {server.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            if server._done.done():
                return 1
        server.stop()
        return 0
    finally:
        security.close()

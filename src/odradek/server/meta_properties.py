"""``meta.properties``: the identity file in every log dir (Kafka's ``BrokerMetadataCheckpoint``).

Format (Java properties, version 0)::

    version=0
    broker.id=<int>
    cluster.id=<base64 uuid>

A dir without the file gets one (written to ``.tmp``, fsynced, renamed). A dir whose file names
another cluster or another broker id is refused with InvalidConfigError: starting on it would mix
two brokers' logs. Called once at start-up, before the listeners are bound.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from odradek.errors import InvalidConfigError
from odradek.server.config import parse_properties

__all__ = ["META_PROPERTIES", "check_meta_properties"]

META_PROPERTIES = "meta.properties"


def check_meta_properties(log_dirs: Iterable[str], broker_id: int, cluster_id: str) -> None:
    """Check each dir's ``meta.properties`` against this broker, writing it where missing."""
    for d in log_dirs:
        path = os.path.join(d, META_PROPERTIES)
        if not os.path.exists(path):
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            continue
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
        if props.get("cluster.id") not in (None, cluster_id):
            raise InvalidConfigError(
                f"The cluster id {cluster_id} does not match the cluster.id {props.get('cluster.id')} "
                f"stored in {path}; this log dir belongs to another cluster"
            )
        if props.get("broker.id") not in (None, str(broker_id)):
            raise InvalidConfigError(
                f"Configured broker.id {broker_id} does not match broker.id {props.get('broker.id')} stored in {path}"
            )

"""Shared test helpers. Broker fixtures come from the ``odradek.testing`` pytest plugin."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
logging.getLogger("kafka").setLevel(logging.WARNING)
logging.getLogger("aiokafka").setLevel(logging.WARNING)

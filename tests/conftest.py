"""Shared test helpers. Broker fixtures come from the ``odradek.testing`` pytest plugin."""

from __future__ import annotations

import gc
import logging
import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
logging.getLogger("kafka").setLevel(logging.WARNING)
logging.getLogger("aiokafka").setLevel(logging.WARNING)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Collect unreferenced librdkafka clients now: destroyed after the run's summary, they log
    connection failures to brokers the tests already stopped."""
    gc.collect()

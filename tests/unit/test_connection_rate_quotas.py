"""Connection creation rates (KIP-612): per IP from ``/config/ips``, per listener and broker-wide
from ``max.connection.creation.rate``. No sockets: the quotas are fed times directly."""

from __future__ import annotations

import pytest

from odradek.server.config import KafkaConfig
from odradek.server.connection_quotas import ConnectionQuotas


def _quotas() -> ConnectionQuotas:
    return ConnectionQuotas(100, 100, {}, samples=2, window_s=1)


def test_an_ips_rate_throttles_its_connections_and_does_not_count_them() -> None:
    quotas = _quotas()
    assert quotas.ip_throttle_ms("10.0.0.1", 0) == 0  # no quota: nothing recorded
    quotas.ip_config_changed("<default>", {"connection_creation_rate": "2"})
    quotas.ip_config_changed("10.0.0.9", {"connection_creation_rate": "100"})
    assert [quotas.ip_throttle_ms("10.0.0.1", 0) for _ in range(2)] == [0, 0]
    # a third at once: 3 over the 1 s window taken at the start, 50 % over -> half a window
    assert quotas.ip_throttle_ms("10.0.0.1", 0) == 500
    assert quotas.ip_throttle_ms("10.0.0.1", 0) == 500  # the throttled one was taken back out
    assert quotas.ip_throttle_ms("10.0.0.2", 0) == 0  # another address has a rate of its own
    assert all(quotas.ip_throttle_ms("10.0.0.9", t) == 0 for t in range(50))  # its own, higher quota
    assert quotas.ip_throttle_ms("10.0.0.1", 3000) == 0  # the samples expired
    quotas.ip_config_changed("<default>", {})
    assert all(quotas.ip_throttle_ms("10.0.0.1", 3000 + t) == 0 for t in range(10))


def test_ip_throttle_is_bounded_by_one_window() -> None:
    quotas = _quotas()
    quotas.ip_config_changed("10.0.0.1", {"connection_creation_rate": "1"})
    throttles = [quotas.ip_throttle_ms("10.0.0.1", 0) for _ in range(5)]
    assert throttles[0] == 0 and max(throttles) == 1000


def test_listener_and_broker_wide_rates_delay_new_connections() -> None:
    config = KafkaConfig(
        {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "max.connection.creation.rate": "1000",
            "listener.name.external.max.connection.creation.rate": "2",
        }
    )
    quotas = _quotas()
    quotas.configure_rates(config)
    assert quotas.listener_rates == {"PLAINTEXT": 1000.0, "EXTERNAL": 2.0}
    assert [quotas.listener_delay_s("EXTERNAL", 0.0) for _ in range(2)] == [0.0, 0.0]
    delays = [quotas.listener_delay_s("EXTERNAL", 0.0) for _ in range(3)]
    assert delays[0] == pytest.approx(0.5)
    assert delays[0] < delays[1] < delays[2]  # the next ones wait behind it
    assert quotas.listener_delay_s("PLAINTEXT", 0.0) == 0.0  # the inter-broker listener: its own rate only
    unlimited = _quotas()
    unlimited.configure_rates(KafkaConfig({"broker.id": "0"}))
    assert all(unlimited.listener_delay_s("PLAINTEXT", 0.0) == 0.0 for _ in range(100))

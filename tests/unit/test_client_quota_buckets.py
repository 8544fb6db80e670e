"""Producer and consumer byte rates enforced with a token bucket per rate (KIP-599's algorithm):
burst, refill, throttle time, quota changes, sharing, and the Rate kept for the metrics."""

from __future__ import annotations

import pytest

from odradek.server.client_quotas import ClientQuotaManager, ClientQuotas

D = "<default>"


def _manager(now: list[float], samples: int = 11) -> ClientQuotaManager:
    return ClientQuotaManager("producer_byte_rate", samples, 1.0, lambda: now[0], token_bucket=True)


def test_the_broker_enforces_byte_rates_with_buckets_and_request_percentage_with_its_rate() -> None:
    quotas = ClientQuotas()
    assert quotas.produce.token_bucket and quotas.fetch.token_bucket
    assert not quotas.request.token_bucket
    assert quotas.produce.burst(1000.0) == 10_000.0  # quota x (11 - 1) windows of 1 s
    assert quotas.controller_mutation.burst(2.0) == 22.0  # KIP-599's: quota x 11 windows
    assert ClientQuotas(samples=1).produce.burst(1000.0) == 1000.0  # at least one window


def test_a_full_bucket_passes_the_burst_then_throttles_until_it_is_back_at_zero() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, "app"), 1000.0)
    assert m.record("u", "app", 6_000) == 0  # full: 10 000
    assert m.record("u", "app", 4_000) == 0  # exactly empty is not over
    assert m.record("u", "app", 500) == 500  # -500 at 1000 B/s: back at zero in 0.5 s
    now[0] = 500.0
    assert m.record("u", "app", 1_000) == 1000  # refilled to 0, then 1000 taken
    assert m.throttled_ms_total == 1500
    now[0] = 100_000.0  # a long idle time refills no more than the burst
    assert m.record("u", "app", 10_000) == 0
    assert m.record("u", "app", 1) == 1  # -1 B: 1 ms


def test_a_greedy_client_gets_the_quota_over_any_period_after_the_burst() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, "greedy"), 1_000_000.0)
    sent: list[tuple[float, int]] = []
    while now[0] < 40_000:  # 64 KiB requests at 20 MB/s, each after the previous one's throttle
        now[0] += 65536 / 20_000
        throttle = m.record("u", "greedy", 65536)
        sent.append((now[0], 65536))
        assert throttle <= 66  # never more than one request's worth (Kafka's Rate: whole windows)
        now[0] += throttle
    for start in (10_000.0, 13_000.0, 25_000.0):  # any 10 s after the burst
        got = sum(size for at, size in sent if start <= at < start + 10_000) / 10.0
        assert got == pytest.approx(1_000_000, rel=0.01)
    first_10_s = sum(size for at, size in sent if at < 10_000) / 10.0
    assert first_10_s == pytest.approx(2_000_000, rel=0.02)  # the burst (10 s of quota) counts there


def test_the_rate_still_measures_what_was_recorded() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, "app"), 1000.0)
    m.record("u", "app", 20_000)  # throttled, but recorded in the rate as Kafka's sensor does
    assert m.measured() == [("", "app", pytest.approx(2000.0))]  # 20 000 over 10 windows assumed


def test_buckets_are_shared_as_the_rates_are() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, D), 1000.0)  # clients/<default>: one bucket per client id
    assert m.record("alice", "app", 10_000) == 0
    assert m.record("bob", "app", 1_000) == 1000  # bob's requests under the same client id share it
    assert m.record("alice", "other", 10_000) == 0  # another client id: a bucket of its own
    m.update_quota((D, None), 500.0)  # users/<default>: one per user, whatever the client id
    assert m.record("carol", "app", 5_000) == 0
    assert m.record("carol", "other", 1_000) == 2000
    assert m.record("dave", "app", 5_000) == 0
    assert set(m.buckets) == {("", "app"), ("", "other"), ("carol", ""), ("dave", "")}
    assert set(m.buckets) == set(m.rates)


def test_a_quota_change_keeps_the_balance_refilled_at_the_old_quota_and_caps_it_at_the_new_burst() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, "app"), 1000.0)
    assert m.record("u", "app", 12_000) == 2000  # 10 000 - 12 000 = -2000
    now[0] = 1000.0
    m.update_quota((None, "app"), 100.0)  # the second before counts at 1000 B/s: -1000 at the change
    now[0] = 2000.0
    assert m.record("u", "app", 100) == 10_000  # -1000 + 100 (1 s at 100 B/s) - 100: -1000 at 100 B/s
    now[0] = 20_000.0
    m.update_quota((None, "app"), 10_000.0)  # refilled at 100 B/s: -1000 + 1800 = 800 at the change
    assert m.record("u", "app", 800) == 0
    assert m.record("u", "app", 100) == 10  # 800 - 800 - 100: -100 at 10 000 B/s
    now[0] = 1_000_000.0
    m.update_quota((None, "app"), 1.0)  # full at the old burst (100 000), capped at the new one (10)
    assert m.record("u", "app", 10) == 0
    assert m.record("u", "app", 1) == 1000


def test_a_removed_quota_stops_throttling_and_a_more_specific_level_gets_a_bucket_of_its_own() -> None:
    now = [0.0]
    m = _manager(now)
    m.update_quota((None, "app"), 1000.0)
    assert m.record("alice", "app", 11_000) == 1000
    m.update_quota(("alice", None), 1000.0)  # alice's own level: her own (full) bucket
    assert m.record("alice", "app", 10_000) == 0
    assert m.record("bob", "app", 1) > 0  # the client id's bucket is still in debt
    m.update_quota((None, "app"), None)
    assert m.record("bob", "app", 10**9) == 0  # no quota: nothing throttled


def test_a_throttled_fetch_puts_its_bytes_back_and_one_capped_fetch_empties_a_full_bucket() -> None:
    now = [0.0]
    m = ClientQuotaManager("consumer_byte_rate", 11, 1.0, lambda: now[0], token_bucket=True)
    m.update_quota((None, "app"), 1000.0)
    cap = m.max_value_in_quota_window("u", "app")
    assert cap == m.burst(1000.0) == 10_000.0
    assert m.record("u", "app", cap) == 0  # one capped Fetch from a full bucket passes ...
    assert m.record("u", "app", 3_000) == 3000  # ... the next one straight after is throttled
    m.unrecord("u", "app", 3_000)  # answered empty: its bytes go back
    assert m.buckets[("", "app")].tokens == 0.0
    assert m.measured() == [("", "app", pytest.approx(1000.0))]  # and out of the rate
    now[0] = 3000.0
    assert m.record("u", "app", 3_000) == 0  # 3 s later the same records fit


def test_a_zero_quota_throttles_every_request_for_the_bursts_windows() -> None:
    now = [0.0]
    m = _manager(now, samples=3)
    m.update_quota((None, "app"), 0.0)
    assert m.record("u", "app", 1) == 2000  # (3 - 1) windows of 1 s


def test_request_percentage_throttles_are_bounded_by_one_window() -> None:
    """Kafka's ClientRequestQuotaManager: at most quota.window.size.seconds (byte rates unbounded)."""
    now = [0.0]
    request = ClientQuotaManager("request_percentage", 11, 1.0, lambda: now[0], bounded=True)
    unbounded = ClientQuotaManager("request_percentage", 11, 1.0, lambda: now[0])
    for m in (request, unbounded):
        m.update_quota((None, "app"), 1.0)
    assert request.record("u", "app", 500.0) == 1000  # far over: one window
    assert unbounded.record("u", "app", 500.0) > 1000
    assert ClientQuotas().request.bounded and not ClientQuotas().produce.bounded

"""Client quotas: precedence, rate windows, throttle times, and the quota APIs' rules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.errors import InvalidRequestError
from odradek.server.apis.alter_client_quotas import entity_path, quota_value
from odradek.server.apis.describe_client_quotas import matches
from odradek.server.client_quotas import (
    ClientQuotaManager,
    ClientQuotas,
    QuotaRate,
    client_throttles,
    parse_entity,
    quota_identity,
    throttle_time_ms,
)

D = "<default>"


def test_precedence_most_specific_level_wins() -> None:
    m = ClientQuotaManager("producer_byte_rate")
    levels = [
        ((None, D), 8.0),
        ((None, "app"), 7.0),
        ((D, None), 6.0),
        ((D, D), 5.0),
        ((D, "app"), 4.0),
        (("alice", None), 3.0),
        (("alice", D), 2.0),
        (("alice", "app"), 1.0),
    ]
    # add from least to most specific: each new level must win
    for key, value in levels:
        m.update_quota(key, value)
        found = m.quota_for("alice", "app")
        assert found is not None and found[0] == value
    # tags: who shares a rate
    assert m.quota_for("alice", "app") == (1.0, ("alice", "app"))
    assert m.quota_for("bob", "other") == (5.0, ("bob", "other"))  # users/<default>/clients/<default>
    m.update_quota((D, D), None)
    assert m.quota_for("bob", "other") == (6.0, ("bob", ""))  # users/<default>: one rate per user
    m.update_quota((D, None), None)
    assert m.quota_for("bob", "other") == (8.0, ("", "other"))  # clients/<default>: one per client id
    m.update_quota((None, D), None)
    assert m.quota_for("bob", "other") is None


def test_rate_assumes_n_minus_one_full_windows_and_expires_old_samples() -> None:
    rate = QuotaRate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000  # 10 full windows assumed at the start
    assert rate.measure(0) == pytest.approx(100.0)
    for t in range(1, 20):
        rate.record(1000, t * 1000)
    # 12 samples kept (8000..19000); the one from 8000 had no event for 11 windows: expired
    assert rate.window_size_ms(19_500) == pytest.approx(10_500)
    assert rate.measure(19_500) == pytest.approx(11 * 1000 / 10.5)
    assert rate.measure(19_000 + 11_000) == pytest.approx(0.0)  # nothing for 11 windows: all expired


def test_window_size_steps_down_at_the_first_full_window_as_kafkas() -> None:
    """Kafka's ``Rate.windowSize`` adds (samples - 1 - full windows) windows: 10.999 s just before
    the first window completes, 10 s at it. A greedy client feels the step: its throttle per
    request jumps from what the bytes are over the quota to a whole window more."""
    rate = QuotaRate(samples=11, window_ms=1000)
    rate.record(1, 0)
    assert rate.window_size_ms(999) == 10_999
    assert rate.window_size_ms(1000) == 10_000
    now = [0.0]
    m = ClientQuotaManager("producer_byte_rate", samples=11, window_s=1, clock_ms=lambda: now[0])
    m.update_quota((None, "greedy"), 1_000_000.0)
    throttles = []
    while now[0] < 3000:  # 64 KiB requests at 20 MB/s, each after the previous one's throttle
        now[0] += 65536 / 20_000
        throttle = m.record("u", "greedy", 65536)
        throttles.append((now[0], throttle))
        now[0] += throttle
    first = next(i for i, (_, t) in enumerate(throttles) if t > 0)
    assert 0.5 < throttles[first][0] / 1000 < 0.56  # sent at once: quota x (10 windows + the time elapsed)
    before = [t for at, t in throttles[first + 1 :] if at < 1000]
    after = [t for at, t in throttles if at >= 1000]
    assert before and all(55 <= t <= 70 for t in before)  # 64 KiB / 1 MB/s, the window ~10.5 s
    assert after and all(t >= 1000 for t in after)  # the window is 10 s: a whole window over


def test_measured_reports_each_rate_with_kafkas_tags() -> None:
    now = [0.0]
    m = ClientQuotaManager("request_percentage", samples=2, window_s=1, clock_ms=lambda: now[0])
    assert m.measured() == []
    m.update_quota((None, D), 10.0)
    user, client = quota_identity("User:alice", "app 1")
    m.record(user, client, 5.0)
    assert m.measured() == [("", "app 1", pytest.approx(5.0))]  # one window assumed: 5 / 1 s


def test_request_quota_exempts_only_the_clusters_own_requests() -> None:
    from odradek.protocol.api_keys import ApiKey
    from odradek.server.request_handler import REQUEST_QUOTA_EXEMPT

    for key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA, ApiKey.CONTROLLED_SHUTDOWN):
        assert key in REQUEST_QUOTA_EXEMPT
    assert ApiKey.WRITE_TXN_MARKERS in REQUEST_QUOTA_EXEMPT
    for key in (ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.SASL_HANDSHAKE):
        assert key not in REQUEST_QUOTA_EXEMPT  # KafkaApis answers these with sendResponseMaybeThrottle


def test_throttle_time_is_kafkas_formula() -> None:
    assert throttle_time_ms(150.0, 100.0, 10_000) == 5000
    assert throttle_time_ms(100.0, 100.0, 10_000) == 0
    assert throttle_time_ms(1.0, 0.0, 10_000) == 10_000


def test_manager_records_and_throttles_over_the_quota() -> None:
    now = [0.0]
    m = ClientQuotaManager("producer_byte_rate", samples=11, window_s=1, clock_ms=lambda: now[0])
    assert m.record("alice", "app", 10**9) == 0  # no quota: nothing recorded
    m.update_quota(("alice", None), 1000.0)
    assert m.record("alice", "app", 5000) == 0  # 5000 B over an assumed 10 s: 500 B/s
    throttle = m.record("alice", "app", 10_000)  # 15000 / 10 s = 1500 B/s: 50 % over
    assert throttle == 5000
    assert m.record("bob", "app", 10**6) == 0  # bob has no quota
    m.update_quota(("alice", None), 10**9)  # a changed quota applies to the next request
    assert m.record("alice", "app", 1) == 0
    m.update_quota((None, "app"), 1.0)  # alice's own level still wins over the client's
    assert m.record("alice", "app", 1) == 0 and m.record("bob", "app", 100) > 0


def test_entities_and_config_changes_feed_the_managers() -> None:
    assert parse_entity("users", "alice") == ("alice", None)
    assert parse_entity("users", "alice/clients/app") == ("alice", "app")
    assert parse_entity("users", "<default>/clients/<default>") == (D, D)
    assert parse_entity("clients", "app") == (None, "app")
    assert parse_entity("users", "alice/clients") is None
    quotas = ClientQuotas()
    assert not quotas.enabled
    quotas.user_config_changed("alice", {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=..."})
    quotas.client_config_changed("app", {"consumer_byte_rate": "2048", "request_percentage": "12.5"})
    assert quotas.produce.quotas == {("alice", None): 1024.0}
    assert quotas.fetch.quotas == {(None, "app"): 2048.0}
    assert quotas.request.quotas == {(None, "app"): 12.5}
    quotas.user_config_changed("alice", {})
    assert quotas.enabled and not quotas.produce.quotas
    assert quota_identity("CN=a b,O=x", None) == ("CN%3Da%20b%2CO%3Dx", "")


def test_kip_219_versions() -> None:
    assert not client_throttles(0, 5) and client_throttles(0, 6)  # Produce
    assert not client_throttles(1, 7) and client_throttles(1, 8)  # Fetch
    assert client_throttles(48, 0)  # added after KIP-219


def _entity(**parts: str | None) -> tuple[SimpleNamespace, ...]:
    return tuple(SimpleNamespace(entity_type=t.replace("_", "-"), entity_name=n) for t, n in parts.items())


def test_alter_client_quotas_entities_and_values() -> None:
    assert entity_path(_entity(user="User:a b")) == ("users", "User%3Aa%20b")
    assert entity_path(_entity(user=None, client_id="app")) == ("users", "<default>/clients/app")
    assert entity_path(_entity(client_id=None)) == ("clients", "<default>")
    assert entity_path(_entity(ip="10.0.0.1")) == ("ips", "10.0.0.1")
    for bad, message in (
        ((), "Invalid empty client quota entity"),
        (_entity(user=""), "Empty user not supported"),
        (_entity(ip="1.2.3.4", user="a"), "IP entity should not be used"),
    ):
        with pytest.raises(InvalidRequestError, match=message):
            entity_path(bad)
    assert quota_value("users", "producer_byte_rate", 1024.0) == "1024"
    assert quota_value("users", "request_percentage", 12.5) == "12.5"
    with pytest.raises(InvalidRequestError, match="Configuration producer_byte_rate must be a LONG value"):
        quota_value("users", "producer_byte_rate", 1.5)
    with pytest.raises(InvalidRequestError, match="Invalid configuration key connection_creation_rate"):
        quota_value("users", "connection_creation_rate", 1)
    assert quota_value("ips", "connection_creation_rate", 3) == "3"


def test_describe_client_quotas_filters() -> None:
    alice = {"user": "alice"}
    alice_app = {"user": "alice", "client-id": "app"}
    default_user = {"user": None}
    exact = {"user": (0, "alice")}
    assert matches(exact, alice, strict=True)
    assert matches(exact, alice_app, strict=False) and not matches(exact, alice_app, strict=True)
    assert not matches(exact, default_user, strict=False)
    assert matches({"user": (1, None)}, default_user, strict=True) and not matches({"user": (1, None)}, alice, False)
    assert matches({"user": (2, None)}, default_user, strict=True) and matches({"user": (2, None)}, alice, True)
    assert matches({}, alice_app, strict=False) and not matches({}, alice_app, strict=True)


def test_unrecord_takes_a_throttled_fetch_back_and_the_window_bounds_one_fetch() -> None:
    now = [0.0]
    m = ClientQuotaManager("consumer_byte_rate", samples=11, window_s=1, clock_ms=lambda: now[0])
    assert m.max_value_in_quota_window("alice", "app") == float("inf")  # no quota: no cap
    m.update_quota((None, "app"), 1000.0)
    assert m.max_value_in_quota_window("alice", "app") == 10_000.0  # quota x (11 - 1) x 1 s
    assert m.max_value_in_quota_window("alice", "other") == float("inf")
    assert m.record("alice", "app", 9_000) == 0
    assert m.record("alice", "app", 6_000) == 5000  # 15000 / 10 s: throttled ...
    m.unrecord("alice", "app", 6_000)  # ... answered empty: those bytes do not count
    assert m.record("alice", "app", 1_000) == 0  # 10000 / 10 s: at the quota again


def test_token_bucket_starts_full_refills_at_the_quota_and_caps_at_the_burst() -> None:
    from odradek.server.client_quotas import TokenBucket

    bucket = TokenBucket()
    assert bucket.record(2.0, 22.0, 30, now_ms=0) == -8.0  # full (22), then 30 taken
    assert bucket.refill(2.0, 22.0, 1000) == -6.0  # 2 per second back
    assert bucket.refill(2.0, 22.0, 100_000) == 22.0  # never above the burst


def test_controller_mutation_quota_strict_refuses_once_below_zero_permissive_only_throttles() -> None:
    from odradek.server.client_quotas import ControllerMutationQuotaManager
    from odradek.server.controller_mutation_quota import ControllerMutationQuota

    now = [0.0]
    manager = ControllerMutationQuotaManager(samples=2, window_s=1, clock_ms=lambda: now[0])
    assert manager.bucket("u", "admin") is None
    manager.update_quota((None, "admin"), 2.0)
    found = manager.bucket("u", "admin")
    assert found is not None
    quota, burst, bucket = found
    assert (quota, burst) == (2.0, 4.0)  # burst: quota x samples x window
    strict = ControllerMutationQuota(quota, burst, bucket, True, manager.clock_ms)
    # a request is never split: 3 + 3 partitions pass (4 -> 1 -> -2), the next topic is refused
    assert strict.record(3) and strict.record(3)
    assert strict.throttle_time_ms() == 0
    assert not strict.record(1)
    assert strict.throttle_time_ms() == 1000  # -(-2) / 2 per second
    now[0] = 400.0
    assert strict.throttle_time_ms() == 600  # less the time since the violation
    permissive = ControllerMutationQuota(quota, burst, bucket, False, manager.clock_ms)
    assert permissive.record(5)  # always done: -2 + 0.8 - 5 = -6.2
    assert permissive.throttle_time_ms() == 3100
    again = manager.bucket("other-user", "admin")
    assert again is not None and again[2] is bucket  # a client-id level: one bucket per client id

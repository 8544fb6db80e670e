"""Option parsing, offset JSON and micro-batch planning of the Spark data source (no Spark, no sockets)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.offsets import (
    DataLossError,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
    canonical_offsets,
    offsets_from_json,
    parse_assign,
    parse_partition_offsets,
    plan_ranges,
    rate_limit,
    resolve_ranges,
    split_ranges,
)
from odradek.spark.options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    SpecificOffsets,
    SpecificTimestamps,
    Strategy,
    Subscribe,
    SubscribePattern,
    parse_sink_options,
    parse_source_options,
    time_string_as_ms,
)
from odradek.spark.planning import StreamPlanner, plan_batch, resolve_offsets

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


# ------------------------------------------------------------------------------------ strategies
def test_subscribe_trims_and_drops_empty_names() -> None:
    opts = parse_source_options({**BOOT, "subscribe": " a, b ,,c "}, "batch")
    assert opts.strategy == Subscribe(("a", "b", "c"))


def test_subscribe_pattern_and_assign() -> None:
    assert parse_source_options({**BOOT, "subscribePattern": "page_.*"}, "batch").strategy == SubscribePattern(
        "page_.*"
    )
    opts = parse_source_options({**BOOT, "assign": '{"b":[1,0],"a":[3]}'}, "batch")
    assert opts.strategy == Assign((("a", 3), ("b", 0), ("b", 1)))


def test_options_are_case_insensitive() -> None:
    opts = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SUBSCRIBE": "t", "MaxOffsetsPerTrigger": "5"}, "stream"
    )
    assert opts.max_offsets_per_trigger == 5
    assert opts.client.bootstrap_servers == "h:1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
        ({"subscribe": "a", "subscribePattern": "a.*"}, "Only one of the following options can be specified"),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "(unclosed"}, "Invalid regular expression for option 'subscribePattern'"),
        ({"assign": "a:0"}, "No topicpartitions to assign as specified value for option 'assign' is 'a:0'"),
        ({"assign": '{"a":"0"}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {"a":"0"}'),
    ],
)
def test_strategy_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_source_options({**BOOT, **options}, "batch")
    assert message in str(info.value)


# ------------------------------------------------------------------------------- bad options
def test_unknown_option_is_rejected_with_the_supported_list() -> None:
    with pytest.raises(ValueError) as info:
        parse_source_options({**BOOT, "subscribe": "t", "startingOffset": "earliest"}, "batch")
    assert "Unknown option(s) for the odradek source: 'startingoffset'" in str(info.value)
    assert "startingOffsets" in str(info.value)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported. Instead set the source option"),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys are deserialized"),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as values are deserialized"),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
    ],
)
def test_forbidden_kafka_options(key: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_source_options({**BOOT, "subscribe": "t", key: "x"}, "stream")
    assert message in str(info.value)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ValueError, match=r"Option 'kafka\.bootstrap\.servers' must be specified"):
        parse_source_options({"subscribe": "t"}, "batch")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"minPartitions": "0"}, "minPartitions must be positive"),
        ({"maxRecordsPerPartition": "-3"}, "maxRecordsPerPartition must be positive"),
        ({"maxOffsetsPerTrigger": "ten"}, "Option 'maxOffsetsPerTrigger' must be an integer, got 'ten'"),
        ({"failOnDataLoss": "yes"}, "Option 'failOnDataLoss' must be 'true' or 'false', got 'yes'"),
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetPerTrigger(10) is higher than"),
        ({"startingTimestamp": "soon"}, "Expected a single long value, got soon"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, "must be 'error' or 'latest'"),
        ({"maxTriggerDelay": "5 parsecs"}, "Invalid time string '5 parsecs'"),
        ({"startingOffsets": "{nope"}, 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {nope'),
    ],
)
def test_invalid_values(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_source_options({**BOOT, "subscribe": "t", **options}, "stream")
    assert message in str(info.value)


def test_group_id_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        opts = parse_source_options({**BOOT, "subscribe": "t", "kafka.group.id": "g", "groupIdPrefix": "p"}, "stream")
    assert opts.anchor_group() == "g"
    assert "not recommended to set this option" in caplog.text
    assert "groupIdPrefix will be ignored" in caplog.text


# ------------------------------------------------------------------------- offsets options
def test_defaults_per_mode() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "t"}, "batch")
    stream = parse_source_options({**BOOT, "subscribe": "t"}, "stream")
    assert (batch.starting, batch.ending) == (Earliest(), Latest())
    assert stream.starting == Latest()
    assert stream.starts_at_latest and not batch.starts_at_latest
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.max_trigger_delay_ms == 15 * 60 * 1000


def test_offset_precedence_timestamp_over_by_timestamp_over_offsets() -> None:
    both = {"startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"t":{"0":5}}', "startingTimestamp": "7"}
    assert parse_source_options({**BOOT, "subscribe": "t", **both}, "batch").starting == GlobalTimestamp(7, "error")
    del both["startingTimestamp"]
    starting = parse_source_options({**BOOT, "subscribe": "t", **both}, "batch").starting
    assert starting == SpecificTimestamps({("t", 0): 5}, "error")
    del both["startingOffsetsByTimestamp"]
    assert parse_source_options({**BOOT, "subscribe": "t", **both}, "batch").starting == Earliest()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, "startingOffsets for t-0 can't be latest for batch queries"),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, "ending offset for t-0 can't be earliest for batch queries"),
        (
            {"startingOffsets": '{"t":{"0":1}}', "endingOffsets": '{"t":{"1":5}}'},
            "The specified start offset and end offset should have the same topic-partitions",
        ),
        (
            {"startingOffsets": '{"t":{"0":9}}', "endingOffsets": '{"t":{"0":5}}'},
            "The specified start offset 9 is greater than the end offset 5 for topic t partition 0.",
        ),
    ],
)
def test_batch_offset_rules(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_source_options({**BOOT, "subscribe": "t", **options}, "batch")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("endingOffsets", "ending offset not valid in streaming queries"),
        ("endingOffsetsByTimestamp", "ending timestamp not valid in streaming queries"),
    ],
)
def test_stream_rejects_ending_offsets(key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_source_options({**BOOT, "subscribe": "t", key: '{"t":{"0":1}}'}, "stream")


def test_kafka_params_pass_through_minus_intercepted() -> None:
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "kafka.isolation.level": "read_committed", "kafka.default.api.timeout.ms": "2500"},
        "batch",
    )
    assert opts.client.kafka_params == {"bootstrap.servers": "127.0.0.1:9092", "isolation.level": "read_committed"}
    assert opts.client.api_timeout_ms == 2500


def test_retry_settings_accept_zero_interval() -> None:
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "fetchOffset.numRetries": "1", "fetchOffset.retryIntervalMs": "0"}, "batch"
    )
    assert (opts.client.fetch_offset_num_retries, opts.client.fetch_offset_retry_interval_ms) == (1, 0)
    with pytest.raises(ValueError, match=r"Option 'kafka\.default\.api\.timeout\.ms' must be an integer"):
        parse_source_options({**BOOT, "subscribe": "t", "kafka.default.api.timeout.ms": "soon"}, "batch")


def test_time_strings() -> None:
    assert time_string_as_ms("15m") == 900_000
    assert time_string_as_ms("30s") == 30_000
    assert time_string_as_ms("250") == 250
    assert time_string_as_ms("2h") == 7_200_000


def test_anchor_group_is_stable_and_prefix_scoped() -> None:
    a = parse_source_options({**BOOT, "subscribe": "t"}, "stream")
    b = parse_source_options({**BOOT, "subscribe": "t"}, "stream")
    c = parse_source_options({**BOOT, "subscribe": "t", "groupIdPrefix": "other"}, "stream")
    assert a.anchor_group() == b.anchor_group()
    assert a.anchor_group().startswith("spark-kafka-source-")
    assert c.anchor_group().startswith("other-")


# ------------------------------------------------------------------------------------- sink
def test_sink_options() -> None:
    opts = parse_sink_options({**BOOT, "topic": " out ", "checkpointLocation": "/tmp/x"})
    assert opts.topic == "out"
    with pytest.raises(ValueError, match=r"Kafka option 'key\.serializer' is not supported as keys are serialized"):
        parse_sink_options({**BOOT, "kafka.key.serializer": "x"})
    with pytest.raises(ValueError, match=r"Kafka option 'value\.serializer' is not supported"):
        parse_sink_options({**BOOT, "kafka.value.serializer": "x"})
    with pytest.raises(ValueError, match="Unknown option"):
        parse_sink_options({**BOOT, "subscribe": "t"})
    with pytest.raises(ValueError, match="configuring Kafka producer"):
        parse_sink_options({"topic": "t"})


def test_exactly_once_sink_options() -> None:
    default = parse_sink_options({**BOOT, "topic": "out"})
    assert not default.exactly_once and default.transactional_id_prefix == "odradek-sink"
    opts = parse_sink_options(
        {**BOOT, "deliveryGuarantee": "Exactly-Once", "transactionalIdPrefix": "p", "queryId": " q ", "batchId": "0"}
    )
    assert (opts.exactly_once, opts.transactional_id_prefix, opts.query_id, opts.batch_id) == (True, "p", "q", 0)
    with pytest.raises(ValueError, match="'deliveryGuarantee' must be 'at-least-once' or 'exactly-once'"):
        parse_sink_options({**BOOT, "deliveryGuarantee": "twice"})
    with pytest.raises(ValueError, match=r"'transactional\.id' is not supported with deliveryGuarantee=exactly-once"):
        parse_sink_options({**BOOT, "deliveryGuarantee": "exactly-once", "kafka.transactional.id": "x"})
    with pytest.raises(ValueError, match="batchId must be positive"):
        parse_sink_options({**BOOT, "batchId": "-1"})


# ------------------------------------------------------------------------------ offset JSON
def test_canonical_offsets_order_and_round_trip() -> None:
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 2): 7, ("a", 0): 3}
    canon = canonical_offsets(offsets)
    assert json.dumps(canon) == '{"a": {"0": 3, "2": 1}, "b": {"2": 7, "10": 5}}'
    assert offsets_from_json(json.loads(json.dumps(canon))) == offsets
    shuffled = {"b": {"10": 5, "2": 7}, "a": {"2": 1, "0": 3}}
    assert json.dumps(canonical_offsets(offsets_from_json(shuffled))) == json.dumps(canon)
    assert canonical_offsets({}) == {}


def test_parse_offsets_and_assign() -> None:
    assert parse_partition_offsets('{"t":{"0":23,"1":-1},"u":{"0":-2}}') == {("t", 0): 23, ("t", 1): -1, ("u", 0): -2}
    assert parse_assign('{"t":[1,0,1]}') == [("t", 0), ("t", 1)]
    with pytest.raises(ValueError, match="Invalid offset -3"):
        parse_partition_offsets('{"t":{"0":-3}}')


# ----------------------------------------------------------------------------- rate limiting
def test_rate_limit_splits_exactly() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 100, ("t", 1): 100, ("t", 2): 100}
    first = rate_limit(100, start, latest, {})
    assert sum(first.values()) == 100
    second = rate_limit(100, first, latest, {})
    assert sum(second.values()) == 200
    assert rate_limit(100, second, latest, {}) == latest


def test_rate_limit_does_not_starve_and_handles_new_partitions() -> None:
    start = {("t", 0): 0}
    latest = {("t", 0): 1000, ("t", 1): 12}
    end = rate_limit(10, start, latest, {("t", 1): 2})
    assert end[("t", 1)] == 3  # share 0.1 of 10 records rounds up to one
    assert end[("t", 0)] == 9
    assert rate_limit(5000, start, latest, {("t", 1): 2}) == latest


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1),
    st.integers(1, 400),
)
def test_rate_limit_properties(parts: dict[int, tuple[int, int]], limit: int) -> None:
    start = {("t", p): s for p, (s, _) in parts.items()}
    latest = {("t", p): s + lag for p, (s, lag) in parts.items()}
    end = rate_limit(limit, start, latest, {})
    assert set(end) == set(latest)
    for tp in end:
        assert start[tp] <= end[tp] <= latest[tp]
    admitted = sum(end[tp] - start[tp] for tp in end)
    total = sum(latest[tp] - start[tp] for tp in end)
    assert admitted == min(total, limit) or (total > limit and admitted <= limit + len(parts))


# ------------------------------------------------------------------------------------ ranges
def test_split_ranges_min_partitions_and_max_records() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges) == ranges[:2]
    split = split_ranges(ranges, min_partitions=4)
    assert [r for r in split if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]
    assert sum(r.size for r in split if r.partition == 0) == 100
    assert len(split) >= 4
    capped = split_ranges([OffsetRange("t", 0, 0, 100)], max_records_per_partition=30)
    assert [r.size for r in capped] == [25, 25, 25, 25]


def test_resolve_ranges_reports_data_loss(caplog: pytest.LogCaptureFixture) -> None:
    start = {("t", 0): 10, ("t", 1): 5}
    end = {("t", 0): 8, ("t", 2): 4}
    with pytest.raises(DataLossError, match=r"\[t-1\] are gone"):
        resolve_ranges(start, end, {("t", 2): 0}, fail_on_data_loss=True)
    with caplog.at_level(logging.WARNING):
        ranges = resolve_ranges(start, end, {("t", 2): 0}, fail_on_data_loss=False)
    assert ranges == [OffsetRange("t", 2, 0, 4)]
    assert "offset was changed from 10 to 8" in caplog.text
    with pytest.raises(DataLossError, match="Added partition t-2 starts from 3 instead of 0"):
        resolve_ranges({}, {("t", 2): 4}, {("t", 2): 3}, fail_on_data_loss=True)


def test_plan_ranges_rejects_start_after_end() -> None:
    with pytest.raises(ValueError, match="resolved start offset 9 is greater than the resolved end offset 4"):
        plan_ranges({("t", 0): 9}, {("t", 0): 4})


# ---------------------------------------------------------------------------------- planning
class FakeClient:
    """An in-memory cluster: partition -> (log start, log end, {timestamp: offset})."""

    def __init__(self, logs: dict[TopicPartition, tuple[int, int]]) -> None:
        self.logs = dict(logs)
        self.groups: dict[str, PartitionOffsets] = {}
        self.group_calls = 0
        self.commit_calls = 0
        self.groups_broken = False
        self.timestamps: dict[TopicPartition, dict[int, int]] = {}

    def assigned_partitions(self, strategy: Strategy) -> list[TopicPartition]:
        if isinstance(strategy, Assign):
            return list(strategy.partitions)
        return sorted(self.logs)

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.logs[tp][0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.logs[tp][1] for tp in tps}

    def offsets_for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        result = {}
        for tp, ts in timestamps.items():
            matches = [off for t, off in sorted(self.timestamps.get(tp, {}).items()) if t >= ts]
            result[tp] = matches[0] if matches else -1
        return result

    def committed(self, group: str, tps: Iterable[TopicPartition], timeout_ms: int | None = None) -> PartitionOffsets:
        self.group_calls += 1
        if self.groups_broken:
            raise RuntimeError("COORDINATOR_NOT_AVAILABLE")
        stored = self.groups.get(group, {})
        return {tp: stored[tp] for tp in tps if tp in stored}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], timeout_ms: int | None = None) -> None:
        self.commit_calls += 1
        if self.groups_broken:
            raise RuntimeError("COORDINATOR_NOT_AVAILABLE")
        self.groups.setdefault(group, {}).update(offsets)

    def close(self) -> None:
        pass


def test_resolve_offsets_all_specs() -> None:
    client = FakeClient({("t", 0): (2, 10), ("t", 1): (0, 4)})
    client.timestamps = {("t", 0): {100: 3, 200: 7}, ("t", 1): {100: 1}}
    tps = [("t", 0), ("t", 1)]
    assert resolve_offsets(client, Earliest(), tps, starting=True) == {("t", 0): 2, ("t", 1): 0}
    assert resolve_offsets(client, Latest(), tps, starting=False) == {("t", 0): 10, ("t", 1): 4}
    spec = SpecificOffsets({("t", 0): -2, ("t", 1): -1})
    assert resolve_offsets(client, spec, tps, starting=True) == {("t", 0): 2, ("t", 1): 4}
    assert resolve_offsets(client, GlobalTimestamp(150, "latest"), tps, starting=True) == {("t", 0): 7, ("t", 1): 4}
    assert resolve_offsets(client, GlobalTimestamp(150, "error"), tps, starting=False) == {("t", 0): 7, ("t", 1): 4}
    with pytest.raises(ValueError, match="No offset matched from request of topic-partition t-1 and timestamp 150"):
        resolve_offsets(client, GlobalTimestamp(150, "error"), tps, starting=True)
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve_offsets(client, SpecificOffsets({("t", 0): 3}), tps, starting=True)
    with pytest.raises(ValueError, match="you must specify all topics"):
        resolve_offsets(client, SpecificTimestamps({("t", 0): 3}, "error"), tps, starting=True)


def test_plan_batch() -> None:
    client = FakeClient({("t", 0): (0, 10), ("t", 1): (0, 0)})
    opts = parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":4,"1":-2}}'}, "batch")
    assert plan_batch(client, opts) == [OffsetRange("t", 0, 4, 10)]


def test_latest_is_anchored_across_restarts() -> None:
    client = FakeClient({("t", 0): (0, 5), ("t", 1): (0, 7)})
    opts = parse_source_options({**BOOT, "subscribe": "t"}, "stream")
    first = StreamPlanner(opts, lambda: client)
    assert first.initial_offset() == {("t", 0): 5, ("t", 1): 7}
    assert first.initial_offset() == {("t", 0): 5, ("t", 1): 7}  # memoised
    assert client.groups[opts.anchor_group()] == {("t", 0): 5, ("t", 1): 7}
    client.logs = {("t", 0): (0, 9), ("t", 1): (0, 8)}  # more data arrives before the restart
    restarted = StreamPlanner(opts, lambda: client)
    assert restarted.initial_offset() == {("t", 0): 5, ("t", 1): 7}
    restarted.commit({("t", 0): 9, ("t", 1): 8})
    assert client.groups[opts.anchor_group()] == {("t", 0): 9, ("t", 1): 8}


def test_anchor_failure_falls_back_to_latest(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient({("t", 0): (0, 5)})
    client.groups_broken = True
    planner = StreamPlanner(parse_source_options({**BOOT, "subscribe": "t"}, "stream"), lambda: client)
    with caplog.at_level(logging.WARNING):
        assert planner.initial_offset() == {("t", 0): 5}
        planner.commit({("t", 0): 5})
        planner.commit({("t", 0): 6})
    assert "resolved without an anchor" in caplog.text
    assert client.commit_calls == 0  # a cluster that cannot read group offsets is not asked to write them


def test_commit_failure_stops_further_commits(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient({("t", 0): (0, 5)})
    planner = StreamPlanner(parse_source_options({**BOOT, "subscribe": "t"}, "stream"), lambda: client)
    planner.initial_offset()
    client.groups_broken = True
    with caplog.at_level(logging.WARNING):
        planner.commit({("t", 0): 5})
        planner.commit({("t", 0): 6})
    assert caplog.text.count("not committing again") == 1


def test_earliest_needs_no_group() -> None:
    client = FakeClient({("t", 0): (3, 5)})
    planner = StreamPlanner(
        parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": "earliest"}, "stream"), lambda: client
    )
    assert planner.initial_offset() == {("t", 0): 3}
    planner.commit({("t", 0): 5})
    assert client.group_calls == 0 and client.groups == {}


def test_available_now_freezes_target_and_rate_limits() -> None:
    client = FakeClient({("t", 0): (0, 250)})
    planner = StreamPlanner(
        parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": "earliest"}, "stream"), lambda: client
    )
    planner.prepare_available_now()
    start = planner.initial_offset()
    ends = []
    while True:
        end = planner.latest_offset(start, 100)
        client.logs[("t", 0)] = (0, client.logs[("t", 0)][1] + 50)  # data keeps arriving
        if end == start:
            break
        ends.append(end[("t", 0)])
        start = end
    assert ends == [100, 200, 250]
    assert planner.latest_seen == {("t", 0): 250}


def test_min_offsets_per_trigger_delays_until_max_trigger_delay() -> None:
    client = FakeClient({("t", 0): (0, 5)})
    now = [1_000_000.0]
    opts = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "startingOffsets": "earliest",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "1m",
        },
        "stream",
    )
    planner = StreamPlanner(opts, lambda: client, clock_ms=lambda: now[0])
    start = {("t", 0): 0}
    assert planner.latest_offset(start, None) == {("t", 0): 5}  # first trigger never waits
    start = {("t", 0): 5}
    client.logs[("t", 0)] = (0, 9)
    now[0] += 1_000
    assert planner.latest_offset(start, None) == start  # 4 < 10 records: wait
    client.logs[("t", 0)] = (0, 20)
    now[0] += 1_000
    assert planner.latest_offset(start, None) == {("t", 0): 20}
    client.logs[("t", 0)] = (0, 21)
    now[0] += 61_000
    assert planner.latest_offset({("t", 0): 20}, None) == {("t", 0): 21}  # delay expired


def test_stream_ranges_new_partitions_and_identity() -> None:
    client = FakeClient({("t", 0): (0, 10), ("t", 1): (0, 4)})
    opts = parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": "earliest"}, "stream")
    planner = StreamPlanner(opts, lambda: client)
    assert planner.ranges({("t", 0): 3}, {("t", 0): 3}) == []
    assert planner.ranges({("t", 0): 3}, {("t", 0): 10, ("t", 1): 4}) == [
        OffsetRange("t", 0, 3, 10),
        OffsetRange("t", 1, 0, 4),
    ]

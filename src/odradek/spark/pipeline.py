"""The demo data pipeline: clickstream -> Kafka -> Spark Structured Streaming -> Kafka + Parquet.

Runs in the driver process (the ``odradek demo`` command and tests call :func:`run_pipeline`
with the bootstrap servers of a running cluster):

1. create topics ``page_visits`` (5 partitions) and ``page_visit_counts`` (1) with the admin client;
2. produce the first part of a deterministic clickstream (:mod:`odradek.spark.clickstream`) with
   confluent-kafka, keyed by user, and read a sample back with a plain consumer;
3. run the streaming job with ``Trigger.AvailableNow``: read ``page_visits`` through
   ``format("odradek")`` (rate-limited by ``maxOffsetsPerTrigger``, so several micro-batches),
   count visits per page per 1-minute event-time window with a 2-minute watermark, and for every
   window the watermark closes keep the top pages (append mode, so each window is emitted once,
   final). ``foreachBatch`` writes them to Parquet (``<output>/page_visit_counts/batch_id=N``,
   overwritten per batch, so a replayed batch does not duplicate) and to the topic
   ``page_visit_counts`` (JSON values keyed by page, via ``format("odradek")`` with
   ``deliveryGuarantee=exactly-once``, so a replayed batch adds nothing there either);
4. produce the rest of the clickstream plus one end-of-stream heartbeat per partition, and run the
   same query again from its checkpoint: first in a driver process of its own that is killed with
   SIGKILL in a micro-batch, after the batch's output is committed to Kafka and before Spark
   records it (:mod:`odradek.spark.pipeline_crash`), then again here: it resumes from the
   checkpoint, replays the killed batch, and the heartbeats move the watermark past the last
   window so every window is emitted;
5. read both outputs back (the topic with ``isolation.level=read_committed``) and compare them with
   the counts computed in plain Python: equal, with no duplicate from the replayed batch.

On a cluster master (anything but ``local[...]``) the three applications (run 1, the crash run,
the restart) run one after the other, each stopping its session before the next starts, so the
pipeline needs one application's cores; :func:`application_session` checks a ``spark://``
master's free cores first and bounds the wait for an executor (:mod:`odradek.spark.deploy`).

Late events stay within 30 s of the stream's clock, well inside the watermark, so none is
dropped and the Spark result must equal the Python one exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.spark.clickstream import WINDOW_MS, ClickEvent, TopPage, generate, heartbeat, top_pages

__all__ = ["EVENTS_TOPIC", "RESULTS_TOPIC", "PipelineConfig", "PipelineResult", "run_pipeline", "spark_session"]

EVENTS_TOPIC = "page_visits"
RESULTS_TOPIC = "page_visit_counts"
EVENT_PARTITIONS = 5
RELEASE_WAIT_S = 60.0
"""How long a new application waits for the cores of the one that just ended (killed or stopped)."""
EVENT_SCHEMA = "type string, event_id string, user_id string, page string, referrer string, event_time_ms long"

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
"""


@dataclass(frozen=True)
class PipelineConfig:
    """Knobs of the demo; defaults give ~10 minutes of event time in ~11 windows."""

    output_dir: Path
    master: str = "local[*]"
    events: int = 6000
    seed: int = 7
    top_n: int = 3
    max_offsets_per_trigger: int = 1000
    first_run_fraction: float = 0.6
    watermark: str = "2 minutes"
    shuffle_partitions: int = 4
    kill_after_output_batches: int | None = 1
    """Run 1 happens in a driver process killed (SIGKILL) once this many micro-batches have written
    output, then restarts from the checkpoint; None runs it in this process, unkilled."""
    cores_max: int | None = None
    """``spark.cores.max`` of each application on a cluster master (unset: what the master grants)."""
    executor_cores: int | None = None
    """``spark.executor.cores`` on a cluster master; also the free cores each application needs."""
    master_webui: str | None = None
    """A ``spark://`` master's web UI (default ``http://<master host>:8080``) for the free-core check."""
    executor_timeout_s: float = 120.0
    """Watchdog: an application on a cluster master with no executor after this long fails."""
    ship_package: bool = False
    """Ship this driver's ``odradek`` package to the executors as a zip (``addPyFile``, as ``--py-files``)."""
    replication_factor: int = 1
    """Replication factor of both topics (3 on a 3-broker cluster)."""
    min_insync_replicas: int | None = None
    """``min.insync.replicas`` of both topics (unset: the broker's default)."""


@dataclass
class RunReport:
    """One AvailableNow run of the streaming query: ``(batch id, input rows, ms)`` per batch."""

    batches: list[tuple[int, int, int]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class PipelineResult:
    events: list[ClickEvent]
    runs: list[RunReport]
    expected: list[TopPage]
    parquet: list[TopPage]
    topic: list[TopPage]
    killed_in_batch: int | None = None

    @property
    def ok(self) -> bool:
        return self.parquet == self.expected and self.topic == self.expected


# ----------------------------------------------------------------------------------- Kafka side
def create_topics(
    bootstrap: str,
    topics: dict[str, int],
    timeout_s: float = 30.0,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
) -> None:
    """Create ``{name: partitions}`` with ``replication_factor`` and topic ``config``; fails if a
    topic exists."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, n, replication_factor, config=dict(config or {})) for name, n in topics.items()]
    futures = admin.create_topics(new, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)


def produce(bootstrap: str, records: Iterable[tuple[bytes | None, bytes, int | None]], timeout_s: float = 60.0) -> int:
    """Produce ``(key, value, partition or None)`` records, keyed ones with murmur2 (as Java
    clients), idempotently (a retry after a leader change adds no duplicate); returns how many were
    acknowledged. Raises on any delivery error."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "enable.idempotence": True,
        }
    )
    errors: list[str] = []
    sent = 0

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error.str())

    for key, value, partition in records:
        while True:
            try:
                producer.produce(
                    EVENTS_TOPIC,
                    value=value,
                    key=key,
                    partition=-1 if partition is None else partition,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
    if producer.flush(timeout_s) or errors:
        raise RuntimeError(f"producing to {EVENTS_TOPIC} failed: {errors[:1] or 'flush timed out'}")
    return sent


def sample(bootstrap: str, per_partition: int = 1, timeout_s: float = 10.0) -> list[tuple[int, int, str, str]]:
    """The first ``per_partition`` records ``(partition, offset, key, value)`` of every partition
    of ``page_visits``, read back with a plain consumer assigned to each partition at offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "odradek-demo-sample", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(EVENTS_TOPIC, p, 0) for p in range(EVENT_PARTITIONS)])
        rows: dict[int, list[tuple[int, int, str, str]]] = {p: [] for p in range(EVENT_PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while any(len(r) < per_partition for r in rows.values()) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                partition = int(message.partition() or 0)
                if message.error() is None and len(rows[partition]) < per_partition:
                    key = (message.key() or b"").decode()
                    value = (message.value() or b"").decode()
                    rows[partition].append((partition, int(message.offset() or 0), key, value))
        return [row for p in sorted(rows) for row in rows[p]]
    finally:
        consumer.close()


# ----------------------------------------------------------------------------------- Spark side
def spark_session(
    master: str,
    shuffle_partitions: int = 4,
    app_name: str = "odradek-demo",
    jvm_options: str = "",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A quiet Spark session whose Python workers run this interpreter, with ``odradek`` registered.

    ``jvm_options`` are added to the driver JVM's options (e.g. faster-starting JIT settings);
    ``conf`` holds further Spark settings (e.g. ``spark.cores.max``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from odradek.spark import register

    log4j = Path(tempfile.gettempdir()) / "odradek-spark-log4j2.properties"
    log4j.write_text(_LOG4J)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j} {jvm_options}".strip())
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def application_session(config: PipelineConfig, app_name: str, release_wait_s: float = 0.0) -> Any:
    """A session for one application of the pipeline on ``config.master``: on a ``spark://`` master
    first the free-core check (waiting up to ``release_wait_s`` for cores an ended application
    releases), then :func:`spark_session` with :func:`~odradek.spark.deploy.application_conf`,
    the package shipped when ``config.ship_package``, and the executor watchdog. Raises RuntimeError
    (the session stopped) when the master has too few cores or no executor registers in time."""
    from odradek.spark import deploy

    needed = deploy.cores_needed(config.executor_cores)
    deploy.check_master_cores(config.master, config.master_webui, needed, app_name, release_wait_s)
    conf = deploy.application_conf(config.master, config.cores_max, config.executor_cores)
    spark = spark_session(config.master, config.shuffle_partitions, app_name, conf=conf)
    try:
        if config.ship_package:
            spark.sparkContext.addPyFile(str(deploy.package_zip(config.output_dir / "py-files")))
        deploy.wait_for_executors(spark, config.master, config.executor_timeout_s)
    except BaseException:
        spark.stop()
        raise
    return spark


def _write_batch(
    bootstrap: str, parquet_dir: Path, top_n: int, query_id: str, after_write: Callable[[int], None] | None = None
) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function (runs on the driver for every micro-batch). The topic is
    written exactly once (one transaction per task, ``query_id`` + batch id as the progress key);
    ``after_write(batch_id)`` is called once a batch's output is in Kafka (the crash run uses it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def write(counts: Any, batch_id: int) -> None:
        rank = F.row_number().over(Window.partitionBy("window").orderBy(F.desc("count"), F.asc("page")))
        top = (
            counts.where(F.col("page").isNotNull())  # heartbeats carry no page
            .withColumn("rank", rank)
            .where(F.col("rank") <= top_n)
            .select(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "page",
                F.col("count").alias("visits"),
                "rank",
            )
            .persist()
        )
        try:
            if not top.head(1):
                return
            top.write.mode("overwrite").parquet(str(parquet_dir / f"batch_id={batch_id}"))
            value = F.to_json(
                F.struct(
                    F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                    F.unix_millis("window_start").alias("window_start_ms"),
                    "page",
                    "visits",
                    "rank",
                )
            )
            (
                top.select(F.col("page").alias("key"), value.alias("value"))
                .write.format("odradek")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", RESULTS_TOPIC)
                .option("deliveryGuarantee", "exactly-once")
                .option("queryId", query_id)
                .option("batchId", str(batch_id))
                .mode("append")
                .save()
            )
            if after_write is not None:
                after_write(batch_id)
        finally:
            top.unpersist()

    return write


def run_query(
    spark: Any,
    bootstrap: str,
    config: PipelineConfig,
    checkpoint: Path,
    parquet_dir: Path,
    max_offsets: int | None,
    query_id: str,
    after_write: Callable[[int], None] | None = None,
) -> RunReport:
    """One ``Trigger.AvailableNow`` run of the top-pages query; returns when it has finished."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    events = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
    )
    counts = (
        events.withWatermark("event_time", config.watermark)
        .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), F.col("page"))
        .count()
    )
    started = time.monotonic()
    query = (
        counts.writeStream.outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(_write_batch(bootstrap, parquet_dir, config.top_n, query_id, after_write))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    report = RunReport(seconds=time.monotonic() - started)
    for progress in query.recentProgress:
        report.batches.append(
            (int(progress["batchId"]), int(progress["numInputRows"]), int(progress["durationMs"]["triggerExecution"]))
        )
    return report


def _rows_from_parquet(spark: Any, parquet_dir: Path) -> list[TopPage]:
    from pyspark.sql import functions as F

    if not parquet_dir.exists():
        return []
    frame = spark.read.parquet(str(parquet_dir)).select(
        F.unix_millis("window_start").alias("start"), "rank", "page", "visits"
    )
    return sorted(TopPage(r["start"], r["rank"], r["page"], r["visits"]) for r in frame.collect())


def _rows_from_topic(spark: Any, bootstrap: str) -> list[TopPage]:
    frame = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", RESULTS_TOPIC)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("cast(value as string) as value")
    )
    rows = [json.loads(r["value"]) for r in frame.collect()]
    return sorted(TopPage(r["window_start_ms"], r["rank"], r["page"], r["visits"]) for r in rows)


def run_pipeline(
    bootstrap: str, config: PipelineConfig, out: Callable[[str], None] = print, spark: Any = None
) -> PipelineResult:
    """Steps 1-5 of the module docstring against the cluster at ``bootstrap``.

    Uses ``spark`` when given (and leaves it running); otherwise starts a session for
    ``config.master`` and stops it at the end."""
    if spark is None:  # a master with too few cores fails before anything is produced
        from odradek.spark.deploy import check_master_cores, cores_needed

        check_master_cores(config.master, config.master_webui, cores_needed(config.executor_cores), "odradek-demo")
    output = config.output_dir
    checkpoint, parquet_dir = output / "checkpoint", output / RESULTS_TOPIC
    for owned in (checkpoint, parquet_dir):
        shutil.rmtree(owned, ignore_errors=True)
    output.mkdir(parents=True, exist_ok=True)

    topic_config = {}
    if config.min_insync_replicas is not None:
        topic_config["min.insync.replicas"] = str(config.min_insync_replicas)
    create_topics(
        bootstrap,
        {EVENTS_TOPIC: EVENT_PARTITIONS, RESULTS_TOPIC: 1},
        replication_factor=config.replication_factor,
        config=topic_config,
    )
    replicas = f", replication factor {config.replication_factor}" if config.replication_factor > 1 else ""
    replicas += f", min.insync.replicas={config.min_insync_replicas}" if topic_config else ""
    out(f"created topics {EVENTS_TOPIC} ({EVENT_PARTITIONS} partitions) and {RESULTS_TOPIC} (1 partition){replicas}")
    events = generate(config.events, config.seed)
    split = int(len(events) * config.first_run_fraction)
    first, rest = events[:split], events[split:]
    produce(bootstrap, ((e.key, e.to_json(), None) for e in first))
    out(
        f"produced {len(first)} of {len(events)} click events (seed {config.seed}; {_late(events)} of them "
        "arrive after a newer event, up to 30 s late)"
    )
    out("sample read back with a plain consumer (partition, offset, key, value):")
    for partition, offset, key, value in sample(bootstrap):
        out(f"  p{partition} @{offset:<4} {key:<10} {value}")

    own_session = spark is None
    if spark is None:
        spark = application_session(config, "odradek-demo")
    else:
        from odradek.spark import register

        register(spark)
    query_id = f"odradek-demo-{uuid.uuid4().hex[:12]}"  # names the exactly-once progress of this checkpoint
    killed: int | None = None
    try:
        max_offsets = config.max_offsets_per_trigger
        out(f"streaming run 1: Trigger.AvailableNow, maxOffsetsPerTrigger={max_offsets}")
        runs = [run_query(spark, bootstrap, config, checkpoint, parquet_dir, max_offsets, query_id)]
        _print_run(runs[-1], out)
        last_time = max(e.event_time_ms for e in events)
        end_of_stream = last_time + WINDOW_MS + 3 * WINDOW_MS
        produce(
            bootstrap,
            [(e.key, e.to_json(), None) for e in rest]
            + [(None, heartbeat(end_of_stream), p) for p in range(EVENT_PARTITIONS)],
        )
        out(f"produced the remaining {len(rest)} events and {EVENT_PARTITIONS} end-of-stream heartbeats")
        out("streaming run 2: same query restarted from its checkpoint")
        if config.kill_after_output_batches:
            from odradek.spark.deploy import is_local
            from odradek.spark.pipeline_crash import run_killed_query

            release = own_session and not is_local(config.master)
            if release:  # the crash run's application gets this one's cores
                spark.stop()
            killed = run_killed_query(bootstrap, config, checkpoint, parquet_dir, query_id)
            out(
                f"  in a driver process of its own, killed (SIGKILL) in batch {killed} after the batch's results "
                "were committed to Kafka, before Spark recorded the batch; restarted from the checkpoint again:"
            )
            if release:
                spark = application_session(config, "odradek-demo", release_wait_s=RELEASE_WAIT_S)
        runs.append(run_query(spark, bootstrap, config, checkpoint, parquet_dir, None, query_id))
        _print_run(runs[-1], out)
        result = PipelineResult(
            events=events,
            runs=runs,
            expected=top_pages(events, config.top_n),
            parquet=_rows_from_parquet(spark, parquet_dir),
            topic=_rows_from_topic(spark, bootstrap),
            killed_in_batch=killed,
        )
    finally:
        if own_session:
            spark.stop()
    return result


def _late(events: list[ClickEvent]) -> int:
    late, newest = 0, 0
    for event in events:
        late += event.event_time_ms < newest
        newest = max(newest, event.event_time_ms)
    return late


def summary(result: PipelineResult, top_n: int) -> list[str]:
    """A readable report of the results: the top pages of every window and the check."""
    import datetime

    lines = [f"Top {top_n} pages per 1-minute event-time window:"]
    by_window: dict[int, list[TopPage]] = {}
    for row in result.parquet:
        by_window.setdefault(row.window_start_ms, []).append(row)
    for start, rows in sorted(by_window.items()):
        moment = datetime.datetime.fromtimestamp(start / 1000, tz=datetime.UTC).strftime("%H:%M")
        cells = "  ".join(f"{r.page} ({r.visits})" for r in sorted(rows, key=lambda r: r.rank))
        lines.append(f"  {moment}  {cells}")
    visits = len(result.events)
    batches = sum(len(run.batches) for run in result.runs)
    lines.append(f"{visits} visits, {len(by_window)} windows, {batches} micro-batches in {len(result.runs)} runs")
    if result.ok:
        killed = (
            f", exactly once although the driver was killed in batch {result.killed_in_batch} and the batch replayed"
            if result.killed_in_batch is not None
            else ""
        )
        lines.append(
            f"check: Parquet ({len(result.parquet)} rows) and topic {RESULTS_TOPIC} ({len(result.topic)} records, "
            f"read_committed) equal the counts computed directly from the generated events{killed}"
        )
    else:
        lines.append(
            f"check FAILED: expected {len(result.expected)} rows; Parquet has {len(result.parquet)}, "
            f"the topic {len(result.topic)}; first differences: "
            f"{sorted(set(result.expected) ^ set(result.parquet))[:3]} / "
            f"{sorted(set(result.expected) ^ set(result.topic))[:3]}"
        )
    return lines


def _print_run(run: RunReport, out: Callable[[str], None]) -> None:
    for batch_id, rows, ms in run.batches:
        out(f"  batch {batch_id}: {rows} input rows, {ms} ms")
    out(f"  finished in {run.seconds:.1f}s")

"""Kafka's ``RequestMetrics``: requests per API and version, and each API's time split by stage.

MBeans ``kafka.network:type=RequestMetrics,name=<Name>,request=<Api>[,version=<v>]``, rendered
by the JMX exporter as:

- ``kafka_network_requestmetrics_requests_total{request,version}`` (``RequestsPerSec``);
- ``kafka_network_requestmetrics_<stage>{request,quantile}`` and ``..._<stage>_count{request}``
  for the stages :data:`STAGES` (Kafka's ``RequestQueueTimeMs`` .. ``TotalTimeMs``), in ms.

``request`` is Kafka's API name (``ApiKeys.name``: ``Produce``, ``ListOffsets``, ``ApiVersions``).
As Kafka does, a Fetch is also counted under ``FetchConsumer`` or ``FetchFollower`` (a fetch
from a replica), so dashboards that split consumer from follower fetches work.

Where odradek's stages come from (one event loop plays Kafka's network processor and request
handler; see :mod:`odradek.server.socket_server`):

- ``requestqueuetimems``: the whole frame has arrived -> the connection's worker picks it up
  (frames wait behind earlier requests of the same connection, and for the loop);
- ``localtimems``: picked up -> the handler is done, or the request entered a delayed operation
  (acks=all Produce waiting for the ISR, a Fetch long-polling for ``min_bytes``);
- ``remotetimems``: in the delayed operation, until the handler's answer is built (0 otherwise);
- ``responsequeuetimems``: the answer is built -> the connection starts writing it;
- ``responsesendtimems``: writing started -> the bytes are in the socket (after waiting for a full
  write buffer to drain, and for ``sendfile`` of Fetch's file ranges);
- ``totaltimems``: the whole frame has arrived -> the response is sent.

Recording (:meth:`RequestMetrics.record`) is a dict lookup, one reservoir store of the request's
stage tuple and an integer add (no locks, no prometheus_client objects); the collector reads them
at scrape time. Not thread-safe: record and collect on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from odradek.metrics.families import counter, histogram
from odradek.metrics.reservoir import Reservoir, quantiles_of_sorted
from odradek.protocol.api_keys import ApiKey

__all__ = ["API_NAMES", "STAGES", "RequestMetrics", "api_name"]

STAGES: tuple[str, ...] = (
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsequeuetimems",
    "responsesendtimems",
    "totaltimems",
)
"""Kafka's request stages in the order :meth:`RequestMetrics.record` takes them."""

_STAGE_DOCS = {
    "requestqueuetimems": "Time a request waits before its connection's worker picks it up (ms)",
    "localtimems": "Time a request is processed by the broker before any delayed operation (ms)",
    "remotetimems": "Time a request waits in a delayed operation: acks=all, Fetch long poll (ms)",
    "responsequeuetimems": "Time a response waits before the connection starts sending it (ms)",
    "responsesendtimems": "Time to send a response (ms)",
    "totaltimems": "Time from a request's arrival to its response sent (ms)",
}

FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
_FETCH = int(ApiKey.FETCH)
_FETCH_CONSUMER_KEY = -1
_FETCH_FOLLOWER_KEY = -2


def api_name(key: ApiKey) -> str:
    """Kafka's ``ApiKeys.name`` for a key: ``LIST_OFFSETS`` -> ``ListOffsets``."""
    return "".join(word.capitalize() for word in key.name.split("_"))


API_NAMES: dict[int, str] = {int(k): api_name(k) for k in ApiKey}


class _Series:
    """One ``request`` label's samples: a reservoir of stage-time tuples and counts per version."""

    __slots__ = ("name", "reservoir", "versions")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.reservoir = Reservoir(size)
        self.versions: dict[int, int] = {}


class _Stage:
    """One stage's quantiles over one or more series (Fetch is FetchConsumer and FetchFollower)."""

    def __init__(self, series: list[_Series], index: int) -> None:
        self.series = series
        self.index = index

    @property
    def count(self) -> int:
        return sum(s.reservoir.count for s in self.series)

    def quantiles(self) -> list[tuple[str, float]]:
        if len(self.series) == 1:
            return quantiles_of_sorted(self.series[0].reservoir.column(self.index))
        merged = sorted(v for s in self.series for v in s.reservoir.column(self.index))
        return quantiles_of_sorted(merged)


class RequestMetrics:
    """Request counts and stage reservoirs per API (see the module docstring); also a
    ``prometheus_client`` collector.

    A request is recorded once, under its API (a Fetch under ``FetchConsumer`` or
    ``FetchFollower``): one dict lookup, one reservoir store of the stage tuple, one integer add.
    ``Fetch`` is the union of the two fetch series, computed at scrape time."""

    def __init__(self, reservoir_size: int = 1024) -> None:
        self._series: dict[int, _Series] = {}
        """API key (a Fetch: ``-1`` consumer, ``-2`` follower) -> its series."""
        self._size = reservoir_size

    def _new(self, key: int) -> _Series:
        if key == _FETCH_CONSUMER_KEY:
            name = FETCH_CONSUMER
        elif key == _FETCH_FOLLOWER_KEY:
            name = FETCH_FOLLOWER
        else:
            name = API_NAMES.get(key) or str(key)
        series = self._series[key] = _Series(name, self._size)
        return series

    def record(
        self,
        api_key: int,
        api_version: int,
        from_follower: bool,
        times_ms: tuple[float, float, float, float, float, float],
    ) -> None:
        """One completed request; ``times_ms`` in the order of :data:`STAGES`. An API key Kafka
        does not define is counted under its number."""
        if api_key == _FETCH:
            api_key = _FETCH_FOLLOWER_KEY if from_follower else _FETCH_CONSUMER_KEY
        series = self._series.get(api_key)
        if series is None:
            series = self._new(api_key)
        series.reservoir.update(times_ms)
        versions = series.versions
        versions[api_version] = versions.get(api_version, 0) + 1

    @property
    def requests(self) -> dict[tuple[str, int], int]:
        """(request label, version) -> requests completed, ``Fetch`` included."""
        out: dict[tuple[str, int], int] = {}
        for series in self._series.values():
            for version, n in series.versions.items():
                out[(series.name, version)] = n
                if series.name in (FETCH_CONSUMER, FETCH_FOLLOWER):
                    out[("Fetch", version)] = out.get(("Fetch", version), 0) + n
        return out

    def stage_series(self) -> dict[str, list[_Series]]:
        """Request label -> the series its quantiles are computed from."""
        by_name = {s.name: [s] for s in self._series.values()}
        fetches = [s for s in self._series.values() if s.name in (FETCH_CONSUMER, FETCH_FOLLOWER)]
        if fetches:
            by_name["Fetch"] = fetches
        return by_name

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield counter(
            "kafka_network_requestmetrics_requests",
            "Requests completed, per API and version (RequestsPerSec)",
            (({"request": name, "version": str(version)}, n) for (name, version), n in sorted(self.requests.items())),
        )
        series = sorted(self.stage_series().items())
        for index, stage in enumerate(STAGES):
            yield from histogram(
                f"kafka_network_requestmetrics_{stage}",
                _STAGE_DOCS[stage],
                (({"request": name}, _Stage(members, index)) for name, members in series),
            )

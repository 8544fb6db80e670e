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

Recording (:meth:`RequestMetrics.record`) is a few dict lookups, integer adds and six reservoir
stores per request (no locks, no prometheus_client objects); the collector reads them at scrape
time. Not thread-safe: record and collect on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from odradek.metrics.families import counter, histogram
from odradek.metrics.reservoir import Reservoir
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


def api_name(key: ApiKey) -> str:
    """Kafka's ``ApiKeys.name`` for a key: ``LIST_OFFSETS`` -> ``ListOffsets``."""
    return "".join(word.capitalize() for word in key.name.split("_"))


API_NAMES: dict[int, str] = {int(k): api_name(k) for k in ApiKey}


class RequestMetrics:
    """Request counts and stage reservoirs per API (see the module docstring); also a
    ``prometheus_client`` collector."""

    def __init__(self, reservoir_size: int = 1024) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        """(API name, version) -> requests completed."""
        self.stages: dict[str, tuple[Reservoir, ...]] = {}
        """API name -> one reservoir per stage of :data:`STAGES`."""
        self._size = reservoir_size

    def _reservoirs(self, name: str) -> tuple[Reservoir, ...]:
        found = self.stages.get(name)
        if found is None:
            found = self.stages[name] = tuple(Reservoir(self._size) for _ in STAGES)
        return found

    def record(
        self,
        api_key: int,
        api_version: int,
        from_follower: bool,
        times_ms: tuple[float, float, float, float, float, float],
    ) -> None:
        """One completed request; ``times_ms`` in the order of :data:`STAGES`. An API key Kafka
        does not define is counted under its number."""
        name = API_NAMES.get(api_key) or str(api_key)
        self._record(name, api_version, times_ms)
        if api_key == ApiKey.FETCH:
            self._record(FETCH_FOLLOWER if from_follower else FETCH_CONSUMER, api_version, times_ms)

    def _record(self, name: str, api_version: int, times_ms: tuple[float, ...]) -> None:
        key = (name, api_version)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        for reservoir, value in zip(self._reservoirs(name), times_ms):
            reservoir.update(value)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield counter(
            "kafka_network_requestmetrics_requests",
            "Requests completed, per API and version (RequestsPerSec)",
            (({"request": name, "version": str(version)}, n) for (name, version), n in sorted(self.requests.items())),
        )
        for index, stage in enumerate(STAGES):
            yield from histogram(
                f"kafka_network_requestmetrics_{stage}",
                _STAGE_DOCS[stage],
                (({"request": name}, reservoirs[index]) for name, reservoirs in sorted(self.stages.items())),
            )

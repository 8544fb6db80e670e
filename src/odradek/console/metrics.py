"""The throughput chart's data: the brokers' Prometheus endpoints (``--metrics-url``), scraped on demand.

:class:`ThroughputPoller` fetches each URL (``http://host:port/metrics``; a URL without a path gets
``/metrics``) with httpx's async client (timeout :data:`SCRAPE_TIMEOUT_S`, responses larger than
:data:`MAX_SCRAPE_BYTES` refused), reads the all-topics counters
``kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin}_total`` (the series without a
``topic`` label), and keeps the per-second rates between consecutive scrapes, the last
:data:`HISTORY` points. Scrapes happen at most every :data:`MIN_INTERVAL_S` however many pages
poll (``min_interval_s``), so many open charts cost a broker no more than one.

Used on the web server's event loop only (network I/O is async; parsing is small).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["HISTORY", "MIN_INTERVAL_S", "ThroughputPoller", "parse_totals"]

SCRAPE_TIMEOUT_S = 2.0
MAX_SCRAPE_BYTES = 8 * 1024 * 1024
MIN_INTERVAL_S = 5.0
HISTORY = 120
SERIES = ("bytesin", "bytesout", "messagesin")


def parse_totals(text: str) -> dict[str, float]:
    """The all-topics totals of :data:`SERIES` in a Prometheus text exposition (missing ones absent)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removeprefix("kafka_server_brokertopicmetrics_").removesuffix("_total")
            if name in SERIES and "topic" not in sample.labels and sample.name.endswith("_total"):
                out[name] = out.get(name, 0.0) + float(sample.value)
    return out


class ThroughputPoller:
    """Rates per metrics URL: ``{"t": [...], "series": {url: {"bytesin": [...], ...}}}``."""

    def __init__(self, urls: list[str], min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.min_interval_s = min_interval_s
        self.urls = [u if u.rstrip("/").count("/") > 2 else u.rstrip("/") + "/metrics" for u in urls]
        self._last: dict[str, tuple[float, dict[str, float]]] = {}
        self._times: deque[float] = deque(maxlen=HISTORY)
        self._rates: dict[str, dict[str, deque[float | None]]] = {
            u: {s: deque(maxlen=HISTORY) for s in SERIES} for u in self.urls
        }
        self._errors: dict[str, str] = {}
        self._scraped_at = 0.0
        self._lock = asyncio.Lock()
        self._client: httpx.AsyncClient | None = None

    async def _scrape(self, client: httpx.AsyncClient, url: str) -> dict[str, float] | None:
        try:
            async with client.stream("GET", url) as response:
                response.raise_for_status()
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_SCRAPE_BYTES:
                        raise ValueError(f"more than {MAX_SCRAPE_BYTES} bytes")
            self._errors.pop(url, None)
            return parse_totals(body.decode("utf-8", "replace"))
        except (httpx.HTTPError, ValueError) as exc:
            self._errors[url] = f"{type(exc).__name__}: {exc}"
            return None

    async def poll(self) -> dict[str, Any]:
        """Scrape (unless done in the last ``min_interval_s``) and return the history."""
        async with self._lock:
            now = time.time()
            if self.urls and now - self._scraped_at >= self.min_interval_s:
                self._scraped_at = now
                if self._client is None:
                    self._client = httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S)
                client = self._client
                answers = await asyncio.gather(*(self._scrape(client, u) for u in self.urls))
                self._times.append(now)
                for url, totals in zip(self.urls, answers, strict=True):
                    previous = self._last.get(url)
                    for s in SERIES:
                        rate = None
                        if totals is not None and previous is not None and s in totals and s in previous[1]:
                            elapsed = now - previous[0]
                            rate = max(0.0, (totals[s] - previous[1][s]) / elapsed) if elapsed > 0 else None
                        self._rates[url][s].append(rate)
                    if totals is not None:
                        self._last[url] = (now, totals)
            return {
                "t": list(self._times),
                "series": {u: {s: list(v) for s, v in rates.items()} for u, rates in self._rates.items()},
                "errors": dict(self._errors),
            }

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

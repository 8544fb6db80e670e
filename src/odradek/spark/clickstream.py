"""A deterministic clickstream for the demo pipeline, and the answer it should produce.

Pure Python (no Spark, no client): the demo produces these events to Kafka, Spark counts them, and
tests recompute the same counts here to check Spark's results.

Events are JSON objects (UTF-8), keyed by ``user_id`` so one user's clicks stay in one partition::

    {"type": "page_view", "event_id": "7-000042", "user_id": "user-0013", "page": "/products",
     "referrer": "google", "event_time_ms": 1717232405123, "event_time": "2024-06-01T09:00:05.123Z"}

The generator walks a clock forward by exponential gaps (``mean_gap_ms``) from ``start_ms``; a
``late_fraction`` of events carry an event time up to ``max_lateness_ms`` *behind* that clock
(a phone that was offline), so event time and arrival order disagree. The same ``seed`` always
gives the same events.

End-of-stream markers (``"type": "heartbeat"``, no page) move the event-time watermark past the
last window so a streaming query in append mode emits it; they are not visits.
"""

from __future__ import annotations

import datetime
import json
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "PAGES",
    "ClickEvent",
    "TopPage",
    "generate",
    "heartbeat",
    "top_pages",
    "window_counts",
]

PAGES = (
    "/",
    "/products",
    "/products/lamp",
    "/products/chair",
    "/search",
    "/cart",
    "/checkout",
    "/blog",
    "/blog/the-care-of-a-family-man",
    "/about",
    "/help",
    "/account",
)
_PAGE_WEIGHTS = tuple(1 / (rank + 1) ** 0.9 for rank in range(len(PAGES)))  # Zipf-like popularity
_REFERRERS = (None, "google", "newsletter", "social", "partner")
_REFERRER_WEIGHTS = (40, 30, 10, 15, 5)

DEFAULT_START_MS = 1_717_232_400_000  # 2024-06-01T09:00:00Z
WINDOW_MS = 60_000


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(frozen=True)
class ClickEvent:
    """One page view."""

    event_id: str
    user_id: str
    page: str
    referrer: str | None
    event_time_ms: int

    @property
    def key(self) -> bytes:
        return self.user_id.encode()

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "type": "page_view",
                "event_id": self.event_id,
                "user_id": self.user_id,
                "page": self.page,
                "referrer": self.referrer,
                "event_time_ms": self.event_time_ms,
                "event_time": _iso(self.event_time_ms),
            },
            separators=(",", ":"),
        ).encode()


def heartbeat(event_time_ms: int) -> bytes:
    """An end-of-stream marker at ``event_time_ms`` (JSON, no page)."""
    return json.dumps(
        {"type": "heartbeat", "event_time_ms": event_time_ms, "event_time": _iso(event_time_ms)},
        separators=(",", ":"),
    ).encode()


def generate(
    count: int,
    seed: int = 7,
    *,
    start_ms: int = DEFAULT_START_MS,
    mean_gap_ms: float = 100.0,
    users: int = 250,
    late_fraction: float = 0.05,
    max_lateness_ms: int = 30_000,
) -> list[ClickEvent]:
    """``count`` events in arrival order (see the module docstring). ``count=0`` gives ``[]``."""
    rng = random.Random(seed)
    clock = float(start_ms)
    events = []
    for i in range(count):
        clock += rng.expovariate(1 / mean_gap_ms)
        event_time = int(clock)
        if rng.random() < late_fraction:
            event_time -= rng.randint(1_000, max_lateness_ms)
        events.append(
            ClickEvent(
                event_id=f"{seed}-{i:06d}",
                user_id=f"user-{rng.randrange(users):04d}",
                page=rng.choices(PAGES, _PAGE_WEIGHTS)[0],
                referrer=rng.choices(_REFERRERS, _REFERRER_WEIGHTS)[0],
                event_time_ms=event_time,
            )
        )
    return events


def window_counts(events: Iterable[ClickEvent], window_ms: int = WINDOW_MS) -> Counter[tuple[int, str]]:
    """Visits per ``(window start ms, page)`` over tumbling windows aligned to the epoch
    (Spark's ``window(col, "1 minute")``)."""
    return Counter((e.event_time_ms - e.event_time_ms % window_ms, e.page) for e in events)


@dataclass(frozen=True, order=True)
class TopPage:
    """One row of the result: a page's rank among a window's pages."""

    window_start_ms: int
    rank: int
    page: str
    visits: int


def top_pages(events: Iterable[ClickEvent], top_n: int, window_ms: int = WINDOW_MS) -> list[TopPage]:
    """The ``top_n`` pages of every window by visits (ties: page name ascending), sorted by
    window then rank."""
    by_window: dict[int, list[tuple[str, int]]] = {}
    for (start, page), visits in window_counts(events, window_ms).items():
        by_window.setdefault(start, []).append((page, visits))
    result: list[TopPage] = []
    for start, pages in by_window.items():
        ranked = sorted(pages, key=lambda pv: (-pv[1], pv[0]))[:top_n]
        result.extend(TopPage(start, rank, page, visits) for rank, (page, visits) in enumerate(ranked, 1))
    return sorted(result)

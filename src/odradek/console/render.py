"""Turning record bytes into display text: as text, JSON or hex, cut to a bounded size.

:func:`show` never raises: bytes that are not UTF-8 are shown with U+FFFD replacements in text
mode and fall back to text in JSON mode when they do not parse. The result is plain text; the
templates escape it (Jinja2 autoescape), so a record holding ``<script>`` stays text on the page.
Pure functions: safe from any thread.
"""

from __future__ import annotations

import datetime
import json

__all__ = ["CONFIG_SOURCES", "FORMATS", "Shown", "config_source_name", "human_bytes", "show", "timestamp_text"]

CONFIG_SOURCES = (
    "UNKNOWN",
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "CLIENT_METRICS_CONFIG",
    "GROUP_CONFIG",
)
"""Kafka's ``DescribeConfigsResponse.ConfigSource`` names by id."""

FORMATS = ("text", "json", "hex")


class Shown:
    """A rendered key, value or header: ``text``, whether it was cut, and the full size in bytes."""

    __slots__ = ("size", "text", "truncated")

    def __init__(self, text: str, truncated: bool, size: int) -> None:
        self.text = text
        self.truncated = truncated
        self.size = size

    def __repr__(self) -> str:
        return f"Shown({self.text!r}, truncated={self.truncated}, size={self.size})"


def show(data: bytes | None, fmt: str, max_bytes: int) -> Shown | None:
    """``data`` rendered in ``fmt`` (``text``, ``json`` or ``hex``; anything else is ``text``),
    from at most ``max_bytes`` of it; None for a null key/value."""
    if data is None:
        return None
    cut = data[:max_bytes]
    truncated = len(data) > max_bytes
    if fmt == "hex":
        text = "\n".join(cut[i : i + 16].hex(" ") for i in range(0, len(cut), 16))
    elif fmt == "json" and not truncated:
        try:
            text = json.dumps(json.loads(cut), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            text = cut.decode("utf-8", "replace")
    else:
        text = cut.decode("utf-8", "replace")
    return Shown(text, truncated, len(data))


def human_bytes(size: int | None) -> str:
    """``1536`` -> ``1.5 KiB``; None -> ``-``."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def config_source_name(source: int) -> str:
    """A DescribeConfigs ``config_source`` id as Kafka names it (the number when unknown)."""
    return CONFIG_SOURCES[source] if 0 <= source < len(CONFIG_SOURCES) else str(source)


def timestamp_text(ms: int) -> str:
    """A record timestamp in ms as ISO 8601 UTC (``-`` for a negative one)."""
    if ms < 0:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(ms)

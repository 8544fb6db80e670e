"""Helpers shared by the storage unit tests: a settable clock and a LogConfig from keyword properties."""

from __future__ import annotations

from typing import Any

from odradek.storage import LogConfig


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def log_config(**props: Any) -> LogConfig:
    """``segment_bytes=1000`` stands for the property ``segment.bytes=1000``."""
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})

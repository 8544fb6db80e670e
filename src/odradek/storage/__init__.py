"""odradek.storage: one partition on disk, in Kafka's file formats.

* :class:`Log`: a partition directory of segments (append, read, roll, retention, truncation).
* :class:`LogSegment`: a ``.log`` file with its ``.index`` and ``.timeindex``.
* :class:`OffsetIndex`, :class:`TimeIndex`: sparse memory-mapped indexes.
* :class:`LogManager`: every log of a broker across ``log.dirs`` (load/recover, retention, flush,
  checkpoints, clean shutdown).

Everything here is synchronous and not thread-safe: the broker calls it from its asyncio
event-loop thread.
"""

from odradek.storage.config import LogConfig
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager
from odradek.storage.results import FetchDataInfo, FileSlice, LogAppendInfo
from odradek.storage.segment import LogSegment
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "FetchDataInfo",
    "FileSlice",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "TimeIndex",
    "TopicPartition",
]

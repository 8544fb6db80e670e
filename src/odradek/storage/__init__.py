"""odradek.storage: one partition on disk, in Kafka's file formats.

* :class:`Log`: a partition's log (Kafka's ``UnifiedLog``): its segments (``LocalLog``: read,
  roll, retention, truncation), producer state, transaction state, leader epoch cache and
  producer snapshots behind ``append_as_leader`` / ``append_as_follower``.
* :class:`LogSegment`: a ``.log`` file with its ``.index`` and ``.timeindex``.
* :class:`OffsetIndex`, :class:`TimeIndex`: sparse memory-mapped indexes.
* :class:`LogManager`: every log of a broker across ``log.dirs`` (load/recover, retention, flush,
  checkpoints, clean shutdown).

Threading: the log's bookkeeping (offsets, segments, indexes, the log end offset, retention,
truncation, checkpoints) is not thread-safe and runs on the broker's asyncio event-loop thread.
Two kinds of work leave that thread: :meth:`Log.append_as_leader_async` writes a large payload
on one of the replica manager's ``num.io.threads`` I/O threads (``FileRecords.write_at``, under
the file's own lock) and commits it on the loop, and a replica moved between log dirs is copied
on an I/O thread while the partition's appends wait. Pure helpers (``append``, ``log_validator``,
``dump``) may run on any thread. Each module's docstring says which of its methods may run where.
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

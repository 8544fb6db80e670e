"""The log cleaner (Kafka's log compaction): keeps the last record of every key in logs with
``cleanup.policy=compact``.

* :mod:`.offset_map`: key -> latest offset, bounded by the dedupe buffer.
* :mod:`.batch_filter`: the record and batch rules (tombstones and KIP-534 delete horizon,
  aborted transactions, markers, producers' last batches, codecs).
* :mod:`.segment_cleaner`: one clean from files into ``.cleaned`` segments (worker side).
* :mod:`.swap`: file suffixes, the crash-safe swap order and its recovery at load.
* :mod:`.offsets`: the cleanable range and dirty ratio of a log.
* :mod:`.clean`: plan / apply on a ``Log``, and :func:`clean_log` (in-process).
* :mod:`.manager`: Kafka's ``LogCleanerManager`` (checkpoints, selection, uncleanable logs).
* :mod:`.log_cleaner`: Kafka's ``LogCleaner``: cleans in worker processes, swaps on the loop.
* :mod:`.lifeline`: the worker processes (and so the forkserver and resource tracker) die with
  the broker, ``kill -9`` included.
"""

from odradek.storage.cleaner.clean import clean_log
from odradek.storage.cleaner.config import CLEANER_KEYS, CleanerConfig
from odradek.storage.cleaner.log_cleaner import LogCleaner
from odradek.storage.cleaner.manager import CLEANER_OFFSET_CHECKPOINT, LogCleanerManager
from odradek.storage.cleaner.segment_cleaner import CleanerStats

__all__ = [
    "CLEANER_KEYS",
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "clean_log",
]

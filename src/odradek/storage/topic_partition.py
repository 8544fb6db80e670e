"""``TopicPartition``: a (topic, partition) pair, and the partition directory name rule.

A partition's directory under a log dir is ``<topic>-<partition>`` (Kafka's rule); topic names
may themselves contain ``-``, so the partition is the part after the last ``-``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition", "parse_topic_partition_dir"]


class TopicPartition(NamedTuple):
    """A topic name and a partition index; hashable, ordered, immutable."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition directory's name: ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"


def parse_topic_partition_dir(name: str) -> TopicPartition | None:
    """``orders-3`` -> ``TopicPartition("orders", 3)``; None for any other name."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return TopicPartition(topic, int(part))

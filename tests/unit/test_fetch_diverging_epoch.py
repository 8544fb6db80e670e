"""Fetch v12's diverging epoch: when the leader answers it, and that clients' decoders read it."""

from __future__ import annotations

from pathlib import Path

from odradek.protocol.codec import decode_response
from odradek.protocol.fetch_response import FetchedPartition, encode_fetch_response
from odradek.protocol.records import Record, build_batch
from odradek.replication.partition import Partition, PartitionState
from odradek.replication.replica_manager import diverging_epoch
from odradek.storage import Log, TopicPartition

from .storage_support import log_config


def test_the_encoded_diverging_epoch_decodes_with_kio() -> None:
    part = FetchedPartition(0, 0, 10, 10, 0, b"", diverging_epoch=(3, 42))
    frame = b"".join(bytes(p) for p in encode_fetch_response(12, 5, [("t", [part])]))
    _cid, response = decode_response(1, 12, frame[4:])
    (p,) = response.responses[0].partitions
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (3, 42)
    plain = b"".join(bytes(x) for x in encode_fetch_response(12, 5, [("t", [FetchedPartition(0, 0, 1, 1, 0, b"")])]))
    (q,) = decode_response(1, 12, plain[4:])[1].responses[0].partitions
    assert q.diverging_epoch.epoch == -1


def test_divergence_is_where_the_fetchers_epoch_ends_on_the_leader(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    p = Partition(TopicPartition("t", 0), 1, log, PartitionState(-1, -1, [], []))
    p.make_leader(PartitionState(1, 2, [1], [1]), now_ms=0)
    log.append_as_leader(build_batch([Record(None, b"a")] * 5), 2)
    p.make_leader(PartitionState(1, 4, [1], [1]), now_ms=0)
    log.append_as_leader(build_batch([Record(None, b"b")] * 5), 4)
    assert diverging_epoch(p, 4, 10) is None  # up to date
    assert diverging_epoch(p, 2, 5) is None  # epoch 2 ended at 5: the fetcher is at its end
    assert diverging_epoch(p, 2, 7) == (2, 5)  # the fetcher wrote past the end of epoch 2
    assert diverging_epoch(p, 3, 5) == (2, 5)  # the leader never had epoch 3
    assert diverging_epoch(p, 9, 10) is None  # an epoch the leader does not know yet: no answer

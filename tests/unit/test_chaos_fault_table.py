"""The proxy's fault table: per-link rules, symmetric partitions, heal."""

from __future__ import annotations

from chaos.proxy import CLEAN, CLIENT, FaultProxy, FaultTable, LinkRule, Route


def test_a_cut_is_symmetric_and_leaves_other_links_alone() -> None:
    table = FaultTable()
    table.cut("b1", "zk")
    assert table.rule("b1", "zk").drop and table.rule("zk", "b1").drop
    assert table.rule("b2", "zk") == CLEAN
    assert table.rule("b1", "b2") == CLEAN
    table.heal()
    assert table.rules == {}


def test_partition_cuts_every_cross_pair_only() -> None:
    table = FaultTable()
    table.partition(["b1"], ["b2", "b3"])
    assert table.cut_links() == [("b1", "b2"), ("b1", "b3"), ("b2", "b1"), ("b3", "b1")]
    assert table.rule("b2", "b3") == CLEAN


def test_slow_links_keep_a_cut_and_clean_rules_disappear() -> None:
    table = FaultTable()
    table.slow("client", "b1", latency_s=0.2, bandwidth_bps=1000)
    assert table.rule("b1", "client") == LinkRule(latency_s=0.2, bandwidth_bps=1000)
    table.cut("client", "b1")
    assert table.rule("client", "b1") == LinkRule(True, 0.2, 1000)
    table.slow("client", "b1")  # latency and bandwidth back to none; the cut stays
    assert table.rule("client", "b1") == LinkRule(drop=True)


def test_the_source_of_a_connection() -> None:
    proxy = FaultProxy(sources={"127.0.0.11": "b1"})
    to_b2 = Route(("127.0.0.12", 1), ("127.0.0.1", 2), "b2")
    zk_of_b3 = Route(("127.0.0.13", 3), ("127.0.0.1", 4), "zk", source="b3")
    assert proxy.source_of(to_b2, "127.0.0.11") == "b1"
    assert proxy.source_of(to_b2, "127.0.0.1") == CLIENT
    assert proxy.source_of(zk_of_b3, "127.0.0.1") == "b3"

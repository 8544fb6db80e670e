"""Ports handed out for local brokers: below the ephemeral range, one slice per pytest-xdist worker."""

from __future__ import annotations

import socket

import pytest

from odradek import free_ports


def _ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_a_port_is_bindable_and_below_the_ephemeral_range() -> None:
    port = free_ports.free_port()
    assert free_ports.LOW <= port < _ephemeral_low()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_consecutive_ports_differ_and_a_bound_port_is_skipped() -> None:
    first = free_ports.free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1 if first + 1 < _ephemeral_low() else first))
        held.listen()
        taken = held.getsockname()[1]
        seen = {free_ports.free_port() for _ in range(50)}
    assert taken not in seen and first not in seen
    assert len(seen) == 50


@pytest.mark.parametrize(("a", "b"), [("gw0", "gw1"), ("gw3", "gw7"), ("gw1", "gw15")])
def test_workers_draw_from_disjoint_slices(monkeypatch: pytest.MonkeyPatch, a: str, b: str) -> None:
    ranges = []
    for worker in (a, b):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        start, end = free_ports._slice()
        port = free_ports.free_port()
        assert start <= port < end
        ranges.append(range(start, end))
    assert not set(ranges[0]) & set(ranges[1])

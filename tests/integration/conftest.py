"""Fixtures for the integration tests: a real Apache ZooKeeper (``odradek.testing``'s fixtures on
``odradek.testing_zk``)."""

from __future__ import annotations

from odradek.testing import zookeeper_connect, zookeeper_server

__all__ = ["zookeeper_connect", "zookeeper_server"]

"""meta.properties: written where missing, a dir of another cluster or broker refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.errors import InvalidConfigError
from odradek.server.config import parse_properties
from odradek.server.meta_properties import META_PROPERTIES, check_meta_properties


def test_written_where_missing_and_accepted_again(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    check_meta_properties([str(d) for d in dirs], 3, "clusterA")
    for d in dirs:
        props = parse_properties((d / META_PROPERTIES).read_text())
        assert props == {"version": "0", "broker.id": "3", "cluster.id": "clusterA"}
        assert not (d / (META_PROPERTIES + ".tmp")).exists()
    check_meta_properties([str(d) for d in dirs], 3, "clusterA")  # the same broker starts again


def test_another_cluster_or_broker_is_refused(tmp_path: Path) -> None:
    check_meta_properties([str(tmp_path)], 1, "clusterA")
    with pytest.raises(InvalidConfigError, match="belongs to another cluster"):
        check_meta_properties([str(tmp_path)], 1, "clusterB")
    with pytest.raises(InvalidConfigError, match=r"Configured broker\.id 2 does not match broker\.id 1"):
        check_meta_properties([str(tmp_path)], 2, "clusterA")
    before = (tmp_path / META_PROPERTIES).read_text()
    assert "broker.id=1" in before  # a refused start leaves the file as it was

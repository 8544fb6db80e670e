"""The standalone master's JSON, parsed without a master."""

from __future__ import annotations

from odradek.spark.standalone import parse_master_json

MASTER_JSON = {
    "url": "spark://127.0.0.1:7077",
    "status": "ALIVE",
    "cores": 6,
    "coresused": 2,
    "workers": [
        {"id": "worker-1", "state": "ALIVE", "cores": 2, "coresused": 2},
        {"id": "worker-2", "state": "ALIVE", "cores": 2, "coresused": 0},
        {"id": "worker-3", "state": "DEAD", "cores": 2, "coresused": 0},
    ],
    "activeapps": [{"id": "app-1", "name": "odradek-demo", "cores": 2}],
}


def test_counts_alive_workers_and_their_cores_only() -> None:
    status = parse_master_json(MASTER_JSON)
    assert (status.workers, status.cores, status.cores_used, status.cores_free) == (2, 4, 2, 2)
    assert status.url == "spark://127.0.0.1:7077" and status.status == "ALIVE"
    assert status.active_apps == [("app-1", "odradek-demo", 2)]


def test_missing_keys_count_as_nothing() -> None:
    status = parse_master_json({})
    assert (status.workers, status.cores, status.cores_used, status.cores_free, status.active_apps) == (0, 0, 0, 0, [])


def test_free_cores_never_negative() -> None:
    status = parse_master_json({"workers": [{"state": "ALIVE", "cores": 1, "coresused": 3}]})
    assert status.cores_free == 0

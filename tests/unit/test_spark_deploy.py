"""Core sizing, the master's web UI address, the free-core message and the package zip, without Spark."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from odradek.spark import deploy, standalone
from odradek.spark.standalone import MasterStatus


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[*]", True),
        ("local[2]", True),
        ("local[2,3]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://host:6443", False),
        ("localhost", False),
    ],
)
def test_local_masters(master: str, local: bool) -> None:
    assert deploy.is_local(master) is local


def test_application_conf_sizes_cluster_applications_only() -> None:
    assert deploy.application_conf("local[*]", 2, 1) == {}
    assert deploy.application_conf("spark://h:7077", None, None) == {}
    assert deploy.application_conf("spark://h:7077", 2, 1) == {"spark.cores.max": "2", "spark.executor.cores": "1"}
    assert deploy.application_conf("yarn", 4, None) == {"spark.cores.max": "4"}


def test_cores_needed_is_one_executor() -> None:
    assert deploy.cores_needed(None) == 1
    assert deploy.cores_needed(2) == 2


def test_webui_of_a_standalone_master() -> None:
    assert deploy.webui_for_master("spark://10.0.0.5:7077") == "http://10.0.0.5:8080"
    assert deploy.webui_for_master("spark://a:7077,b:7077") == "http://a:8080"
    assert deploy.webui_for_master("spark://a:7077", "http://a:18080/") == "http://a:18080"
    assert deploy.webui_for_master("local[*]") is None
    assert deploy.webui_for_master("yarn") is None


def test_cores_message_says_what_is_needed_and_what_is_used() -> None:
    message = deploy.cores_message("spark://h:7077", 2, 2, 2, "odradek-demo-crash")
    assert "odradek-demo-crash needs 2 free cores" in message
    assert "the master spark://h:7077 has 0 (2 alive, 2 used by other applications)" in message
    assert "needs 1 free core," in deploy.cores_message("spark://h:7077", 1, 0, 0, "a")


def test_check_master_cores_fails_at_once_with_too_few_free_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def status(url: str) -> MasterStatus:
        asked.append(url)
        return MasterStatus("spark://h:7077", "ALIVE", 1, 2, 1, [("app-1", "other", 1)])

    monkeypatch.setattr(standalone, "master_status", status)
    deploy.check_master_cores("spark://h:7077", None, 1, "a")
    with pytest.raises(RuntimeError, match="needs 2 free cores, the master spark://h:7077 has 1 "):
        deploy.check_master_cores("spark://h:7077", None, 2, "a")
    assert asked == ["http://h:8080", "http://h:8080"]


def test_check_master_cores_passes_on_local_and_unreachable_masters(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(url: str) -> MasterStatus:
        raise OSError("connection refused")

    monkeypatch.setattr(standalone, "master_status", unreachable)
    deploy.check_master_cores("local[*]", None, 8, "a")
    deploy.check_master_cores("spark://h:7077", None, 8, "a")


def test_package_zip_holds_the_package_sources(tmp_path: Path) -> None:
    target = deploy.package_zip(tmp_path)
    names = zipfile.ZipFile(target).namelist()
    assert "odradek/__init__.py" in names and "odradek/spark/source.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


class _Tracker:
    def __init__(self, infos: list[str]) -> None:
        self.infos = infos

    def statusTracker(self) -> _Tracker:
        return self

    def getExecutorInfos(self) -> list[str]:
        return self.infos


class _Session:
    """What the watchdog reads of a SparkSession: ``sparkContext._jsc.sc().statusTracker()``."""

    def __init__(self, infos: list[str]) -> None:
        tracker = _Tracker(infos)
        self.sparkContext = type("Ctx", (), {"_jsc": type("Jsc", (), {"sc": lambda _self: tracker})()})()


def test_watchdog_fails_an_application_without_executors() -> None:
    with pytest.raises(RuntimeError, match=r"no executor registered within 0s on spark://h:7077"):
        deploy.wait_for_executors(_Session(["driver"]), "spark://h:7077", 0.01)
    deploy.wait_for_executors(_Session(["driver", "executor 0"]), "spark://h:7077", 0.01)
    deploy.wait_for_executors(_Session(["driver"]), "local[2]", 0.01)  # local: executors live in the driver
    assert deploy.executor_count(_Session(["driver", "0", "1"])) == 2

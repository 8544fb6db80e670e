"""Running the pipeline's applications on a cluster master: core sizing, the free-core check, the
executor watchdog and shipping the ``odradek`` package to executors.

- :func:`application_conf`: the Spark settings of one application for a master. On ``local[...]``
  nothing; on any other master ``spark.cores.max`` and ``spark.executor.cores`` when given (a
  standalone master otherwise grants an application every free core; the pipeline runs its
  applications one after the other and stops each session before the next starts).
- :func:`webui_for_master`: a ``spark://host:port`` master's web UI, ``http://host:8080`` unless
  given (Spark's default ``spark.master.ui.port``); None for other masters (YARN, k8s, local).
- :func:`check_master_cores`: before an application starts on a ``spark://`` master, read the
  master's ``/json/`` and fail at once when its alive workers have fewer free cores than the
  application needs, saying what it needs; waits up to ``wait_s`` for cores being released (the
  executors of an application that just ended). An unreachable web UI is not an error (the master
  may hide it): the executor watchdog still bounds the wait.
- :func:`wait_for_executors`: after the session starts on a non-local master, poll Spark's status
  tracker until at least one executor registered; RuntimeError after ``timeout_s``.
- :func:`package_zip`: a zip of the ``odradek`` package this driver imports, built at run time,
  for ``SparkContext.addPyFile`` (what ``--py-files`` does): executors on other machines, or with
  another ``odradek`` installed, import the driver's code.

All functions run on the driver's main thread.
"""

from __future__ import annotations

import time
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_MASTER_WEBUI_PORT",
    "application_conf",
    "check_master_cores",
    "cores_message",
    "cores_needed",
    "is_local",
    "package_zip",
    "wait_for_executors",
    "webui_for_master",
]

DEFAULT_MASTER_WEBUI_PORT = 8080


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` and ``local-cluster[...]``
    (everything runs on this machine without a cluster manager to ask)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def cores_needed(executor_cores: int | None) -> int:
    """The free cores one application needs before its first executor can start:
    ``spark.executor.cores`` when set (an executor takes that many at once), otherwise one."""
    return max(1, executor_cores or 1)


def application_conf(master: str, cores_max: int | None, executor_cores: int | None) -> dict[str, str]:
    """Spark settings for one application of the pipeline on ``master`` (empty for local masters)."""
    conf: dict[str, str] = {}
    if is_local(master):
        return conf
    if cores_max:
        conf["spark.cores.max"] = str(cores_max)
    if executor_cores:
        conf["spark.executor.cores"] = str(executor_cores)
    return conf


def webui_for_master(master: str, webui: str | None = None) -> str | None:
    """The web UI URL to read a standalone master's JSON from: ``webui`` when given, else the
    first host of a ``spark://host:port[,host2:port2]`` URL on port 8080; None for other masters."""
    if webui:
        return webui.rstrip("/")
    if not master.startswith("spark://"):
        return None
    host = urlsplit(master.split(",")[0]).hostname or "127.0.0.1"
    return f"http://{host}:{DEFAULT_MASTER_WEBUI_PORT}"


def cores_message(master: str, needed: int, cores: int, cores_used: int, app_name: str) -> str:
    """The error for a master with too few free cores (``cores`` of alive workers, ``cores_used``
    by other applications)."""
    free = max(0, cores - cores_used)
    return (
        f"application {app_name} needs {needed} free core{'s' if needed != 1 else ''}, the master {master} has "
        f"{free} ({cores} alive, {cores_used} used by other applications); free cores or lower "
        "spark.cores.max / spark.executor.cores"
    )


def check_master_cores(master: str, webui: str | None, needed: int, app_name: str, wait_s: float = 0.0) -> None:
    """Raise RuntimeError (:func:`cores_message`) when the standalone master at ``master`` has fewer
    than ``needed`` free cores after waiting up to ``wait_s``; no-op for other masters or when the
    web UI does not answer."""
    from odradek.spark.standalone import master_status

    url = webui_for_master(master, webui)
    if url is None:
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            status = master_status(url)
        except (OSError, ValueError):
            return
        if status.cores_free >= needed:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(cores_message(master, needed, status.cores, status.cores_used, app_name))
        time.sleep(0.5)


def executor_count(spark: Any) -> int:
    """Executors registered with ``spark``'s driver now (the driver itself not counted)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)


def wait_for_executors(spark: Any, master: str, timeout_s: float) -> None:
    """The executor watchdog: return once an executor registered; on a local master at once.
    RuntimeError naming the master after ``timeout_s`` without one (the caller stops the session)."""
    if is_local(master):
        return
    deadline = time.monotonic() + timeout_s
    while executor_count(spark) < 1:
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"no executor registered within {timeout_s:.0f}s on {master}: the cluster has no free cores "
                "or its workers cannot start executors (see the workers' logs)"
            )
        time.sleep(0.25)


def package_zip(destination: Path) -> Path:
    """Zip the ``odradek`` package this process imports into ``destination/odradek.zip`` (``.py``
    files and ``py.typed``, no caches); returns its path."""
    import odradek

    root = Path(odradek.__file__).resolve().parent
    destination.mkdir(parents=True, exist_ok=True)
    target = destination / "odradek.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
                archive.write(path, Path("odradek") / path.relative_to(root))
    return target

"""``odradek cluster --brokers N [--zookeeper HOST:PORT[/chroot]] [--data-dir D]``: a local cluster.

For development: starts an Apache ZooKeeper (Debian's ``zookeeper`` package, as
:mod:`odradek.testing_zk` runs it) when no address is given, then N ``odradek broker`` processes
with broker ids 1..N, each with its own data dir (``D/broker-<id>``, a temporary dir when ``--data-dir``
is not given) and its own free port on 127.0.0.1 (a ``listeners`` override names it ``{port}``, e.g.
``SASL_SSL://127.0.0.1:{port}``), all on one ZooKeeper chroot (``/odradek``
unless the address names one). Prints each broker's address and the bootstrap servers, then
waits; Ctrl-C or SIGTERM stops the brokers (SIGTERM, then SIGKILL after 30 s) and the ZooKeeper it
started. Exit status 1 when a broker or ZooKeeper does not start (its log tail is printed).

:class:`LocalCluster` does the work and is what the ``odradek_cluster`` pytest fixture
(:mod:`odradek.testing`) hands to tests, with helpers to break brokers from outside:
:meth:`~LocalCluster.kill9`, :meth:`~LocalCluster.sigstop`, :meth:`~LocalCluster.sigcont`,
:meth:`~LocalCluster.restart`, and :meth:`~LocalCluster.wait_until` instead of fixed sleeps.
Each broker's output goes to ``<data dir>/broker-<id>.log``.

Not thread-safe: drive one LocalCluster from one thread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from odradek.free_ports import free_port

__all__ = ["ClusterBroker", "LocalCluster", "main"]

T = TypeVar("T")


def wait_port_free(port: int, attempts: int = 100) -> bool:
    """Wait (up to ``attempts`` x 50 ms) until 127.0.0.1:``port`` can be bound again: the port of a
    broker that just exited may linger briefly. True when it can. The probe binds as the broker
    does (``SO_REUSEADDR``, asyncio's default for servers), so connections of the old process in
    TIME_WAIT do not count: without it, a restart waited up to the 5 s of attempts for them."""
    for _ in range(attempts):
        try:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            return True
        except OSError:
            time.sleep(0.05)
    return False


class ClusterBroker:
    """One ``odradek broker`` process of a :class:`LocalCluster`."""

    def __init__(self, broker_id: int, data_dir: Path, props: Mapping[str, str], log_dirs: int = 1) -> None:
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.log_dirs = [data_dir] if log_dirs == 1 else [data_dir / f"logs-{i}" for i in range(log_dirs)]
        """``log.dirs``: the data dir itself, or ``logs-<i>`` under it when there are several."""
        self.port = free_port()
        self.props = dict(props)
        self.log_path = data_dir.parent / f"broker-{broker_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self, env: Mapping[str, str] | None = None) -> None:
        """Start the process; ``env`` adds to (or overrides) the inherited environment."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            **self.props,
            "broker.id": str(self.broker_id),
            "listeners": self.props.get("listeners", "PLAINTEXT://127.0.0.1:{port}").format(port=self.port),
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
        }
        argv = [sys.executable, "-m", "odradek.cli.main", "broker", "--log-level", "INFO"]
        for key, value in props.items():
            argv += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env} if env else None,
            )

    def wait_listening(self, timeout_s: float) -> None:
        """Return once the port accepts connections; RuntimeError if the process exits or times out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(f"broker {self.broker_id} exited with status {code}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"broker {self.broker_id} did not listen within {timeout_s} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signum)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL after ``timeout_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class LocalCluster:
    """N broker processes (ids ``first_id``..) on one ZooKeeper; see the module docstring.

    ``zookeeper_connect`` None starts a ZooKeeper (stopped by :meth:`close`); a connect string
    without a chroot gets ``/odradek-<random>``. ``overrides`` apply to every broker,
    ``broker_overrides`` {broker id: overrides} to one (on top). The cluster's own ZooKeeper
    sessions (:meth:`read_znode`) use the ``zookeeper.ssl.*`` keys of ``overrides``.
    """

    def __init__(
        self,
        brokers: int,
        base_dir: str | Path | None = None,
        zookeeper_connect: str | None = None,
        overrides: Mapping[str, str] | None = None,
        first_id: int = 1,
        chroot: str | None = None,
        log_dirs: int = 1,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="odradek-cluster-"))
        self.count = brokers
        self.first_id = first_id
        self.overrides = dict(overrides or {})
        self.broker_overrides = {i: dict(o) for i, o in (broker_overrides or {}).items()}
        self.log_dirs = log_dirs
        """``log.dirs`` entries per broker."""
        self._zookeeper_connect = zookeeper_connect
        self._chroot = chroot or f"/odradek-{uuid.uuid4().hex[:8]}"
        self.zookeeper: Any = None
        """The ZooKeeperServer this cluster started, if any."""
        self.brokers: dict[int, ClusterBroker] = {}

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        """``host:port/chroot`` every broker uses."""
        if self._zookeeper_connect is None:
            raise RuntimeError("the cluster is not started")
        connect = self._zookeeper_connect
        return connect if "/" in connect else connect + self._chroot

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        """Start ZooKeeper (if needed) and every broker; returns once all listen."""
        if self._zookeeper_connect is None:
            from odradek.testing_zk import ZooKeeperServer  # Debian's package; standard library only

            self.zookeeper = ZooKeeperServer()
            self.zookeeper.start()
            self._zookeeper_connect = self.zookeeper.connect_string
        props = {"zookeeper.connect": self.zookeeper_connect, **self.overrides}
        for broker_id in range(self.first_id, self.first_id + self.count):
            self.brokers[broker_id] = ClusterBroker(
                broker_id,
                self.base_dir / f"broker-{broker_id}",
                {**props, **self.broker_overrides.get(broker_id, {})},
                self.log_dirs,
            )
        try:
            for broker in self.brokers.values():
                broker.spawn()
            for broker in self.brokers.values():
                broker.wait_listening(timeout_s)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every broker (in parallel), then the ZooKeeper this cluster started."""
        threads = [threading.Thread(target=b.stop) for b in self.brokers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.zookeeper is not None:
            self.zookeeper.close()
            self.zookeeper = None
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- addresses ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,...`` of the brokers whose process is alive."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.alive())

    def broker(self, broker_id: int) -> ClusterBroker:
        return self.brokers[broker_id]

    def alive_ids(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.alive()]

    def read_znode(self, path: str) -> bytes | None:
        """The data of ``path`` under the cluster's chroot, or None if it does not exist (read
        with a short-lived ZooKeeper session; call outside any running event loop)."""
        from odradek.metadata.zookeeper import ZooKeeperStore
        from odradek.security.zookeeper_tls import zk_tls_config

        tls = zk_tls_config(self.overrides).ssl_context()

        async def read() -> bytes | None:
            store = ZooKeeperStore(self.zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=5000, tls=tls)
            await store.start()
            try:
                if await store.exists(path) is None:
                    return None
                data, _stat = await store.get(path)
                return data
            finally:
                await store.close()

        return asyncio.run(read())

    # --- breaking brokers --------------------------------------------------------------------

    def kill9(self, broker_id: int) -> None:
        """SIGKILL: the process dies at once; its ZooKeeper session expires after the timeout."""
        self.brokers[broker_id].kill()

    def sigstop(self, broker_id: int) -> None:
        """SIGSTOP: the process freezes (connections stay open, nothing answers)."""
        self.brokers[broker_id].signal(signal.SIGSTOP)

    def sigcont(self, broker_id: int) -> None:
        self.brokers[broker_id].signal(signal.SIGCONT)

    def stop(self, broker_id: int) -> None:
        """SIGTERM and wait: a clean shutdown."""
        self.brokers[broker_id].stop()

    def restart(self, broker_id: int, timeout_s: float = 60.0) -> ClusterBroker:
        """Stop the broker if it runs (cleanly), start it again on the same port and data dir."""
        broker = self.brokers[broker_id]
        broker.stop()
        wait_port_free(broker.port)
        broker.spawn()
        broker.wait_listening(timeout_s)
        return broker

    # --- waiting -----------------------------------------------------------------------------

    @staticmethod
    def wait_until(
        condition: Callable[[], T], timeout_s: float = 15.0, interval_s: float = 0.05, message: str = ""
    ) -> T:
        """Call ``condition`` until it returns a true value (returned) or ``timeout_s`` passes
        (AssertionError with ``message`` and the last exception ``condition`` raised, if any)."""
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while True:
            try:
                value = condition()
                if value:
                    return value
            except Exception as exc:
                last = exc
            if time.monotonic() >= deadline:
                detail = f" (last error: {last!r})" if last is not None else ""
                raise AssertionError(f"timed out after {timeout_s} s waiting for {message or condition}{detail}")
            time.sleep(interval_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek cluster", description="Run a local development cluster.")
    parser.add_argument("--brokers", type=int, default=3, help="number of brokers (ids 1..N), default 3")
    parser.add_argument("--zookeeper", help="HOST:PORT[/chroot] of a running ZooKeeper; default: start one")
    parser.add_argument("--data-dir", help="parent of the brokers' data dirs; default: a temporary dir")
    parser.add_argument("--log-dirs", type=int, default=1, help="log.dirs per broker (logs-<i> in its data dir)")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker config for every broker"
    )
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"odradek cluster: invalid --override {item!r}: expected key=value", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    cluster = LocalCluster(args.brokers, data_dir, args.zookeeper, overrides, chroot="/odradek", log_dirs=args.log_dirs)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start()
    except ImportError as exc:
        print(f"odradek cluster: cannot start ZooKeeper ({exc}); pass --zookeeper HOST:PORT", file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as exc:
        print(f"odradek cluster: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"zookeeper.connect={cluster.zookeeper_connect}", flush=True)
        for broker in cluster.brokers.values():
            dirs = ",".join(str(d) for d in broker.log_dirs)
            print(f"broker {broker.broker_id}: {broker.bootstrap_servers} (log.dirs {dirs})", flush=True)
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        reported: set[int] = set()
        while not stop.wait(0.5):
            for broker in cluster.brokers.values():
                if broker.proc is not None and broker.proc.poll() is not None and broker.broker_id not in reported:
                    print(f"broker {broker.broker_id} exited with status {broker.proc.returncode}", flush=True)
                    reported.add(broker.broker_id)
    finally:
        print("stopping the cluster", flush=True)
        cluster.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

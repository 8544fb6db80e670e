"""A throwaway Apache ZooKeeper server for tests and ``odradek cluster``: :class:`ZooKeeperServer`.

``with ZooKeeperServer() as zk: ...`` starts Debian's Apache ZooKeeper 3.8 (the ``zookeeper``
package: ``/usr/share/java/zookeeper.jar``, whose manifest carries its class path) as a
standalone server on a free ``127.0.0.1`` port, with its own temporary data dir, the admin
server disabled and the ``ruok``/``srvr``/``stat`` four-letter words allowed. It returns once
``ruok`` answers ``imok`` (at most ``start_timeout_s``, default 20 s) and on exit terminates the
JVM, waits for it and removes the data dir. ``restart()`` stops and starts it on the same port
and data dir (sessions survive a restart shorter than their timeout, as in ZooKeeper).

This module needs nothing beyond the standard library (``odradek cluster`` runs it after a plain
install); the pytest fixtures built on it (``zookeeper_server``, ``zookeeper_connect``) live in
:mod:`odradek.testing`. If ZooKeeper or Java is missing, :meth:`ZooKeeperServer.check_installed`
raises :class:`ZooKeeperNotInstalled` saying to run ``make test``, which installs them.

``ZooKeeperServer(sasl_users={"broker": "secret"})`` also authenticates clients with SASL
DIGEST-MD5 against those users (a JAAS ``Server`` section with ``user_<name>="<password>"`` and
``authProvider.1=...SASLAuthenticationProvider``): an authenticated session's identity is
``sasl:<name>``; unauthenticated clients may still connect (``world:anyone``).

``ZooKeeperServer(tls=ServerTls(...))`` serves TLS on a ``secureClientPort`` through ZooKeeper's
Netty connection factory (``serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory``,
``ssl.keyStore.*`` / ``ssl.trustStore.*`` in ``zoo.cfg``, PEM or PKCS12 stores, client
certificates required unless ``client_auth`` says otherwise) and, by default, no plain port:
``port`` and :attr:`connect_string` are then the TLS port. A client certificate authenticates the
session as ``x509:<subject DN>`` (ZooKeeper's ``X509AuthenticationProvider``). Readiness is then a
TLS connection answering ``ruok`` when ``tls.probe`` (an ``ssl.SSLContext``) is given, else the
port accepting connections.

The server's log (``zookeeper.log`` in the data dir) is quoted in start-up errors.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from odradek.free_ports import free_port

__all__ = ["ServerTls", "ZooKeeperNotInstalled", "ZooKeeperServer", "four_letter_word"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
NETTY_EXTRA_JARS = (Path("/usr/share/java/netty-codec.jar"), Path("/usr/share/java/netty-resolver.jar"))
"""Netty's SSL handler needs these; the ZooKeeper jar's manifest does not name them."""
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")


class ZooKeeperNotInstalled(RuntimeError):
    pass


def four_letter_word(port: int, word: str, timeout_s: float = 2.0, tls: ssl.SSLContext | None = None) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``...) and return the answer; over
    TLS with ``tls`` (a client context)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as raw:
        s = raw if tls is None else tls.wrap_socket(raw, server_hostname="127.0.0.1")
        s.sendall(word.encode("ascii"))
        chunks = []
        try:
            while chunk := s.recv(4096):
                chunks.append(chunk)
        except ssl.SSLError:
            pass  # the server closes without close_notify once it has answered
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass(frozen=True)
class ServerTls:
    """The server side of ZooKeeper's TLS port: ZooKeeper's ``ssl.*`` keys of ``zoo.cfg``.

    Stores are PEM (one file: key and chain; the CAs) or PKCS12; ``client_auth`` is ZooKeeper's
    ``ssl.clientAuth`` (``need``, ``want``, ``none``). ``probe`` is a client context the fixture
    uses to ask ``ruok`` over TLS; ``plain_port`` keeps a plain ``clientPort`` as well."""

    keystore_location: str
    truststore_location: str
    keystore_type: str = "PEM"
    truststore_type: str = "PEM"
    keystore_password: str | None = None
    truststore_password: str | None = None
    client_auth: str = "need"
    probe: ssl.SSLContext | None = None
    plain_port: bool = False

    def zoo_cfg(self) -> list[str]:
        lines = [
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.keystore_location}",
            f"ssl.keyStore.type={self.keystore_type}",
            f"ssl.trustStore.location={self.truststore_location}",
            f"ssl.trustStore.type={self.truststore_type}",
            f"ssl.clientAuth={self.client_auth}",
        ]
        if self.keystore_password is not None:
            lines.append(f"ssl.keyStore.password={self.keystore_password}")
        if self.truststore_password is not None:
            lines.append(f"ssl.trustStore.password={self.truststore_password}")
        return lines


class ZooKeeperServer:
    """A standalone ZooKeeper on 127.0.0.1 (see the module docstring). Not thread-safe."""

    def __init__(
        self,
        start_timeout_s: float = 20.0,
        tick_time_ms: int = 500,
        sasl_users: Mapping[str, str] | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.start_timeout_s = start_timeout_s
        self.tick_time_ms = tick_time_ms
        self.sasl_users = dict(sasl_users or {})
        self.tls = tls
        self.port = 0
        """The port of :attr:`connect_string`: the TLS one when ``tls`` is given."""
        self.plain_port = 0
        """A plain ``clientPort`` beside the TLS one (``tls.plain_port``), else 0."""
        self.base_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def chroot_connect(self, chroot: str | None = None) -> str:
        """``127.0.0.1:<port>/<chroot>``, a fresh unique chroot if none is given."""
        chroot = chroot or f"/test-{uuid.uuid4().hex[:12]}"
        return self.connect_string + chroot

    @staticmethod
    def check_installed() -> str:
        """The ``java`` executable; raises :class:`ZooKeeperNotInstalled` with what to do."""
        java = shutil.which("java")
        if not ZOOKEEPER_JAR.exists() or java is None:
            missing = "Apache ZooKeeper (" + str(ZOOKEEPER_JAR) + ")" if not ZOOKEEPER_JAR.exists() else "java"
            raise ZooKeeperNotInstalled(
                f"{missing} is not installed; run `make test`, which installs the Debian packages "
                "zookeeper and default-jre-headless"
            )
        return java

    def _write_config(self) -> Path:
        assert self.base_dir is not None
        data_dir = self.base_dir / "data"
        data_dir.mkdir(exist_ok=True)
        config = self.base_dir / "zoo.cfg"
        tls = self.tls
        if tls is None:
            ports = [f"clientPort={self.port}", "clientPortAddress=127.0.0.1"]
        else:
            ports = [f"secureClientPort={self.port}", "secureClientPortAddress=127.0.0.1", *tls.zoo_cfg()]
            if tls.plain_port:
                self.plain_port = self.plain_port or free_port()
                ports += [f"clientPort={self.plain_port}", "clientPortAddress=127.0.0.1"]
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={data_dir}",
                    *ports,
                    "maxClientCnxns=0",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                    "forceSync=no",
                    *(
                        ["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"]
                        * bool(self.sasl_users)
                    ),
                    "",
                ]
            )
        )
        return config

    def _sasl_options(self) -> list[str]:
        """The JVM options of SASL DIGEST-MD5 server authentication (none without ``sasl_users``)."""
        if not self.sasl_users:
            return []
        assert self.base_dir is not None
        users = " ".join(f'user_{name}="{password}"' for name, password in self.sasl_users.items())
        jaas = self.base_dir / "jaas.conf"
        jaas.write_text(f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n")
        return [f"-Djava.security.auth.login.config={jaas}"]

    def start(self) -> None:
        java = self.check_installed()
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="odradek-zk-"))
        for attempt in range(3):
            if self.port == 0 or attempt > 0:
                self.port = free_port()
            try:
                self._spawn(java)
                return
            except RuntimeError:
                self._kill()
                if attempt == 2:
                    raise

    def _spawn(self, java: str) -> None:
        assert self.base_dir is not None
        config = self._write_config()
        classpath = [str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.exists():
            classpath.append(str(SLF4J_SIMPLE_JAR))
        if self.tls is not None:
            classpath += [str(jar) for jar in NETTY_EXTRA_JARS if jar.exists()]
        self._log = self.base_dir / "zookeeper.log"
        command = [
            java,
            *JVM_OPTIONS,
            *self._sasl_options(),
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            os.pathsep.join(classpath),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(config),
        ]
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.base_dir
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with status {self._process.returncode}: {self._log_tail()}")
            try:
                if self._ready():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(
            f"ZooKeeper did not answer ruok on 127.0.0.1:{self.port} within {self.start_timeout_s} s: "
            f"{self._log_tail()}"
        )

    def _ready(self) -> bool:
        """ruok answered (over TLS with a probe context); a TLS port without one: it accepts."""
        tls = self.tls
        if tls is None:
            return four_letter_word(self.port, "ruok", 1.0) == "imok"
        if tls.probe is not None:
            return four_letter_word(self.port, "ruok", 1.0, tls.probe) == "imok"
        if tls.plain_port:
            return four_letter_word(self.plain_port, "ruok", 1.0) == "imok"
        socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
        return True

    def _log_tail(self) -> str:
        if self._log is None or not self._log.exists():
            return "(no log)"
        lines = self._log.read_text(errors="replace").splitlines()
        return "\n".join(lines[-20:]) or "(empty log)"

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop(self) -> None:
        """Stop the server, keeping its data dir and port (for :meth:`restart`)."""
        self._kill()

    def restart(self) -> None:
        self.stop()
        java = self.check_installed()
        for _ in range(50):  # the port may linger for a moment after the JVM exits
            try:
                self._spawn(java)
                return
            except RuntimeError:
                self._kill()
                time.sleep(0.2)
        raise RuntimeError(f"ZooKeeper could not restart on port {self.port}: {self._log_tail()}")

    def close(self) -> None:
        self._kill()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> ZooKeeperServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

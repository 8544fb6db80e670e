"""A throwaway MIT Kerberos KDC for tests and demos: :class:`KerberosKdc`.

``with KerberosKdc() as kdc: ...`` creates a realm of its own (``ODRADEK.TEST`` unless told) in a
temporary directory with Debian's MIT tools (``kdb5_util create -s`` with a random master
password), writes a ``krb5.conf`` naming only that realm, and starts ``krb5kdc -n`` (in the
foreground, so it is this object's child, killed by the kernel if this process dies first) on a
free ``127.0.0.1`` port, TCP and UDP
(``udp_preference_limit = 1`` makes clients use TCP). It returns once the port accepts TCP
connections (at most ``start_timeout_s``) and on exit kills the KDC, waits for it and removes
the directory: nothing is left running.

- :meth:`add_principal` creates a principal with a random key (``kadmin.local addprinc -randkey``);
  :meth:`keytab` exports keys to a keytab file (``ktadd -norandkey``: the keys stay valid, so
  several keytabs may hold one principal).
- :attr:`environ` is what a process needs to use the realm: ``KRB5_CONFIG`` (the realm's
  krb5.conf) and ``KRB5_KDC_PROFILE``; :meth:`client_environ` adds ``KRB5CCNAME`` (a ticket cache
  file of its own) and ``KRB5_CLIENT_KTNAME`` (a keytab MIT's library logs in from when the cache
  holds no ticket), for clients such as kafka-python that use the default credentials.
- The krb5.conf keeps host names as given (``dns_canonicalize_hostname = false``, ``rdns =
  false``), so a client asking for ``kafka@127.0.0.1`` gets a ticket for ``kafka/127.0.0.1@REALM``;
  ``ignore_acceptor_hostname = true`` lets a broker accept any principal of its keytab.

Debian's ``krb5-kdc`` and ``krb5-admin-server`` packages provide the programs; if one is missing,
:meth:`KerberosKdc.check_installed` raises :class:`KdcNotInstalled`. Not thread-safe.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from odradek.free_ports import free_port

__all__ = ["KdcNotInstalled", "KerberosKdc"]

PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local")
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/bin")


class KdcNotInstalled(RuntimeError):
    pass


def _program(name: str) -> str:
    found = shutil.which(name) or next((f"{d}/{name}" for d in SBIN_DIRS if os.access(f"{d}/{name}", os.X_OK)), None)
    if found is None:
        raise KdcNotInstalled(f"{name} not found: install Debian's krb5-kdc and krb5-admin-server packages")
    return found


class KerberosKdc:
    """A KDC for one realm on 127.0.0.1 (see the module docstring)."""

    def __init__(self, realm: str = "ODRADEK.TEST", start_timeout_s: float = 10.0, clockskew_s: int = 300) -> None:
        self.realm = realm
        self.clockskew_s = clockskew_s
        """krb5.conf's ``clockskew``: how long after its end a ticket is still accepted."""
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.base_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def check_installed() -> None:
        for name in PROGRAMS:
            _program(name)

    @property
    def krb5_conf(self) -> Path:
        assert self.base_dir is not None, "KDC not started"
        return self.base_dir / "krb5.conf"

    @property
    def environ(self) -> dict[str, str]:
        """``KRB5_CONFIG`` and ``KRB5_KDC_PROFILE`` for processes of this realm."""
        assert self.base_dir is not None, "KDC not started"
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.base_dir / "kdc.conf")}

    def client_environ(self, keytab: Path | str, name: str) -> dict[str, str]:
        """:attr:`environ` plus a ticket cache ``<name>.ccache`` of its own and ``keytab`` as the
        client keytab (MIT's library fetches tickets from it when the cache has none)."""
        assert self.base_dir is not None, "KDC not started"
        return {
            **self.environ,
            "KRB5CCNAME": f"FILE:{self.base_dir / (name + '.ccache')}",
            "KRB5_CLIENT_KTNAME": f"FILE:{keytab}",
        }

    def principal(self, name: str) -> str:
        """``name@REALM``."""
        return f"{name}@{self.realm}"

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> KerberosKdc:
        self.check_installed()
        self.base_dir = Path(tempfile.mkdtemp(prefix="odradek-kdc-"))
        self.port = free_port()
        self._write_configs()
        try:
            self._run(_program("kdb5_util"), "create", "-s", "-r", self.realm, "-P", secrets.token_hex(16))
            log = open(self.base_dir / "krb5kdc.out", "wb")  # noqa: SIM115 (the child keeps it)
            with log:
                self._process = subprocess.Popen(
                    [_program("krb5kdc"), "-n", "-r", self.realm],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **self.environ},
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill the KDC, wait for it, remove its directory. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> KerberosKdc:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- principals -----------------------------------------------------------------------

    def add_principal(self, *names: str, max_life: str | None = None) -> list[str]:
        """Create each principal (``alice``, ``kafka/127.0.0.1``) with a random key; their full names."""
        for name in names:
            args = ["addprinc", "-randkey"] + (["-maxlife", max_life] if max_life else [])
            self.kadmin(*args, self.principal(name))
        return [self.principal(n) for n in names]

    def keytab(self, path: Path | str, names: Iterable[str]) -> Path:
        """Export the keys of ``names`` (created before) to the keytab ``path``; the path."""
        for name in names:
            self.kadmin("ktadd", "-norandkey", "-k", str(path), self.principal(name))
        return Path(path)

    def kadmin(self, *query: str) -> str:
        """One ``kadmin.local -q`` query against this realm's database; its output."""
        return self._run(_program("kadmin.local"), "-r", self.realm, "-q", " ".join(_quote(q) for q in query))

    # --- internals ------------------------------------------------------------------------

    def _run(self, *argv: str) -> str:
        result = subprocess.run(
            argv, capture_output=True, text=True, env={**os.environ, **self.environ}, timeout=30, check=False
        )
        if result.returncode != 0 or "error" in result.stderr.lower():
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def _write_configs(self) -> None:
        assert self.base_dir is not None
        base, realm, port = self.base_dir, self.realm, self.port
        (base / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_ports = {port}\n kdc_tcp_ports = {port}\n\n"
            f"[realms]\n {realm} = {{\n"
            f"  database_name = {base}/principal\n"
            f"  key_stash_file = {base}/stash\n"
            f"  acl_file = {base}/kadm5.acl\n"
            f"  admin_keytab = FILE:{base}/kadm5.keytab\n"
            f"  kdc_listen = 127.0.0.1:{port}\n  kdc_tcp_listen = 127.0.0.1:{port}\n"
            "  max_life = 1d\n  max_renewable_life = 7d\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            " }\n\n"
            f"[logging]\n kdc = FILE:{base}/krb5kdc.log\n"
        )
        (base / "kadm5.acl").write_text("")
        (base / "krb5.conf").write_text(
            "[libdefaults]\n"
            f" default_realm = {realm}\n"
            " dns_lookup_kdc = false\n dns_lookup_realm = false\n"
            " dns_canonicalize_hostname = false\n rdns = false\n"
            " udp_preference_limit = 1\n ignore_acceptor_hostname = true\n"
            f" forwardable = true\n clockskew = {self.clockskew_s}\n\n"
            f"[realms]\n {realm} = {{\n  kdc = 127.0.0.1:{port}\n }}\n\n"
            f"[domain_realm]\n localhost = {realm}\n 127.0.0.1 = {realm}\n"
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"krb5kdc exited ({self._process.returncode}): {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{self.port}: {self._log_tail()}")

    def _log_tail(self) -> str:
        assert self.base_dir is not None
        parts = []
        for name in ("krb5kdc.out", "krb5kdc.log"):
            path = self.base_dir / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(parts) or "(no log)"


def _die_with_parent() -> None:
    """In the KDC's child process before exec: SIGKILL it if the process that started it dies
    (Linux ``PR_SET_PDEATHSIG``), so a killed test run leaves no KDC behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _quote(text: str) -> str:
    return f'"{text}"' if any(c in text for c in " \t") else text

"""The servers the wording captures fail against, all on 127.0.0.1 (started by capture.py).

- four ``openssl s_server -www`` instances: ``valid`` (the local CA's certificate for
  127.0.0.1), ``expired`` (same CA, validity ended a day ago), ``wronghost`` (same CA, for
  ``wrong.example`` only), ``selfsigned`` (no CA);
- ``api``: a plain-HTTP stub API (http.server) answering ``/v1/allocations`` 401
  (``WWW-Authenticate: Bearer``), ``/v1/nodes`` 403, ``/slow`` 200 after 3 s, else 200 (the
  paths are neutral on purpose: no word of a URL may help a rule);
- ``ingress``: nginx (plain HTTP) proxying ``/api/`` to the stub, ``/down/`` to a port where
  nothing listens (a real 502) and ``/slow/`` to the stub's ``/slow`` with
  ``proxy_read_timeout 1s`` (a real 504);
- ``closed``: a port where nothing listens (connection refused);
- ``mtls``: ``openssl s_server -Verify 1`` with the valid certificate (a client certificate is
  required);
- ``ssh``: sshd on 127.0.0.1, public keys only; user ``wording`` (setup_user.sh) trusts the key
  ``ssh/id`` under the root;
- ``full`` and ``ro`` (under the root): a 16 KiB tmpfs filled to the last byte and a tmpfs
  mounted read-only (needs CAP_SYS_ADMIN; skipped, and their cases with them, without it);
- ``pg``: a throwaway PostgreSQL cluster, ``password_encryption=scram-sha-256`` and
  ``host all all 127.0.0.1/32 scram-sha-256``; superuser ``postgres`` password ``pgpass``,
  role ``app`` password ``apppass``, database ``wording`` with a table ``items``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from make_certs import make as make_certs

from devstack.database import _runner as pg_runner
from devstack.database import find_binaries

#: A local account with a password and an unrestricted sudoers entry (setup_user.sh): sudo
#: asks it for its password, which is what Ansible's become without one runs into.
USER = "wording"
PG_SUPERUSER_PASSWORD = "pgpass"
PG_APP_PASSWORD = "apppass"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class _Api(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: dict[str, str], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError):  # nginx gave up on /slow (the 504 case)
            self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.removeprefix("/api").removeprefix("/slow")
        if self.path.startswith(("/slow", "/api/slow")):
            time.sleep(3)
            self._answer(200, {"status": "late"}, {})
        elif path == "/v1/allocations":
            self._answer(
                401,
                {"detail": "Not authenticated"},
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        elif path == "/v1/nodes":
            self._answer(403, {"detail": "Not enough permissions"}, {})
        else:
            self._answer(200, {"status": "ok"}, {})

    def log_message(self, format: str, *args: object) -> None:
        pass


_NGINX_CONF = """worker_processes 1;
{user}daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    server {{
        listen 127.0.0.1:{port};
        location /api/ {{ proxy_pass http://127.0.0.1:{api}; }}
        location /down/ {{ proxy_pass http://127.0.0.1:{closed}; proxy_connect_timeout 2s; }}
        location /slow/ {{ proxy_pass http://127.0.0.1:{api}; proxy_read_timeout 1s; }}
    }}
}}
"""


class Environment:
    """Start everything under ``root``; :meth:`stop` ends what was started."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.processes: list[subprocess.Popen[bytes]] = []
        self.ports: dict[str, int] = {}
        self.api: ThreadingHTTPServer | None = None
        self.pg_data: Path | None = None
        self.pg_prefix: list[str] = []
        self.mounts: dict[str, Path] = {}

    def start(self, *, with_pg: bool = True) -> dict[str, object]:
        self.root.mkdir(parents=True, exist_ok=True)
        certs = make_certs(self.root / "certs")
        for name in ("valid", "expired", "wronghost", "selfsigned", "mtls"):
            port = free_port()
            cert = "valid" if name == "mtls" else name
            # mtls: the valid certificate, and a client certificate required (-Verify 1)
            verify = ["-Verify", "1", "-CAfile", str(certs / "ca.pem")] if name == "mtls" else []
            self.processes.append(
                subprocess.Popen(
                    [
                        "openssl",
                        "s_server",
                        "-accept",
                        f"127.0.0.1:{port}",
                        "-cert",
                        str(certs / f"{cert}.pem"),
                        "-key",
                        str(certs / f"{cert}.key"),
                        *verify,
                        "-www",
                        "-quiet",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            self.ports[name] = port
        self.api = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
        self.ports["api"] = self.api.server_address[1]
        threading.Thread(target=self.api.serve_forever, daemon=True).start()
        self.ports["closed"] = free_port()
        self._start_nginx()
        self._start_sshd()
        for name in ("valid", "expired", "wronghost", "selfsigned", "mtls", "ingress", "ssh"):
            if name in self.ports:
                _wait_listening(self.ports[name])
        if with_pg:
            self._start_pg()
        self._mount()
        info: dict[str, object] = {
            "root": str(self.root),
            "ca": str(certs / "ca.pem"),
            "ports": self.ports,
            "mounts": {name: str(path) for name, path in self.mounts.items()},
        }
        (self.root / "env.json").write_text(json.dumps(info, indent=2))
        return info

    def _start_sshd(self) -> None:
        """sshd on 127.0.0.1, keys only; the ``wording`` user (if it exists) trusts ``ssh/id``."""
        sshd = "/usr/sbin/sshd"
        if not Path(sshd).exists():
            return
        keys = self.root / "ssh"
        keys.mkdir(exist_ok=True)
        for name in ("host", "id"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)],
                check=True,
            )
        try:
            account = pwd.getpwnam(USER)
        except KeyError:
            account = None
        if account is not None:
            dot_ssh = Path(account.pw_dir) / ".ssh"
            dot_ssh.mkdir(mode=0o700, exist_ok=True)
            authorized = dot_ssh / "authorized_keys"
            authorized.write_text((keys / "id.pub").read_text())
            authorized.chmod(0o600)
            for path in (dot_ssh, authorized):
                os.chown(path, account.pw_uid, account.pw_gid)
        Path("/run/sshd").mkdir(exist_ok=True)  # its privilege-separation directory
        self.ports["ssh"] = free_port()
        self.processes.append(
            subprocess.Popen(
                [
                    sshd,
                    "-D",
                    "-e",
                    "-f",
                    "/dev/null",
                    "-o",
                    f"ListenAddress=127.0.0.1:{self.ports['ssh']}",
                    "-h",
                    str(keys / "host"),
                    "-o",
                    "PasswordAuthentication=no",
                    "-o",
                    "KbdInteractiveAuthentication=no",
                    "-o",
                    "UsePAM=no",
                    "-o",
                    "PidFile=none",
                    "-o",
                    "Subsystem=sftp internal-sftp",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _start_nginx(self) -> None:
        prefix = self.root / "nginx"
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.ports["ingress"] = free_port()
        user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
        conf = prefix / "nginx.conf"
        conf.write_text(
            _NGINX_CONF.format(
                user=user,
                prefix=prefix,
                port=self.ports["ingress"],
                api=self.ports["api"],
                closed=self.ports["closed"],
            )
        )
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.processes.append(
            subprocess.Popen(
                [nginx, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _mount(self) -> None:
        for name, options in (("full", "size=16k,mode=1777"), ("ro", "ro,size=16k")):
            path = self.root / name
            path.mkdir(exist_ok=True)
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                capture_output=True,
                check=False,
            )
            if mounted.returncode == 0:
                self.mounts[name] = path
        if "full" in self.mounts:
            fd = os.open(self.mounts["full"] / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass  # ENOSPC: the filesystem is full, as wanted
            finally:
                os.close(fd)

    def _pg(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.pg_prefix, *args], capture_output=True, text=True, check=check, timeout=60
        )

    def _start_pg(self) -> None:
        bin_dir = find_binaries()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL server binaries are not installed")
        self.pg_prefix = pg_runner()
        pg_root = self.root / "pg"
        pg_root.mkdir(exist_ok=True)
        pwfile = pg_root / "pwfile"
        pwfile.write_text(PG_SUPERUSER_PASSWORD + "\n")
        if self.pg_prefix:
            shutil.chown(pg_root, user="postgres")
            shutil.chown(pwfile, user="postgres")
        data = pg_root / "data"
        self._pg(
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        port = free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {pg_root} -c fsync=off"
            " -c password_encryption=scram-sha-256"
        )
        self._pg(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(pg_root / "server.log"),
            "-w",
            "start",
        )
        self.pg_data = data
        self.pg_bin = bin_dir
        self.ports["pg"] = port
        self._pg(
            str(bin_dir / "psql"),
            "-h",
            str(pg_root),
            "-p",
            str(port),
            "-U",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            f"CREATE ROLE app LOGIN PASSWORD '{PG_APP_PASSWORD}'",
            "-c",
            "CREATE DATABASE wording OWNER app",
        )
        table = (
            "CREATE TABLE items (id int PRIMARY KEY, value text);"
            "INSERT INTO items VALUES (1, 'a'), (2, 'b');"
        )
        self._pg(
            str(bin_dir / "psql"),
            "-h",
            str(pg_root),
            "-p",
            str(port),
            "-U",
            "app",
            "-d",
            "wording",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            table,
        )

    def stop(self) -> None:
        for path in self.mounts.values():
            subprocess.run(["umount", str(path)], check=False)
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        if self.api is not None:
            self.api.shutdown()
        if self.pg_data is not None:
            self._pg(
                str(self.pg_bin / "pg_ctl"),
                "-D",
                str(self.pg_data),
                "-m",
                "fast",
                "stop",
                check=False,
            )

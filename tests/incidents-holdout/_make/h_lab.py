"""The real programs the hold-out cases run: PostgreSQL, nginx, Node.js, Go, Java, Ansible.

Everything listens on 127.0.0.1 only, under ``/tmp/h_lab/<case>/``; every process started
here is stopped by :meth:`Lab.close`. Tools outside the project (see ``README.md`` beside):

- ``/tmp/h_venv``: ansible-core, ansible-runner, oslo.log, oslo.concurrency,
  python-statemachine (``python3 -m venv /tmp/h_venv && /tmp/h_venv/bin/pip install ...``);
- ``/tmp/h_node/node_modules``: ``pg`` and ``pino`` from npm;
- Debian: ``postgresql-15``, ``nginx``, ``golang-go``, ``openjdk-17-jdk``,
  ``libpostgresql-jdbc-java``, ``ipmitool``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAKE = Path(__file__).resolve().parent
HOLDOUT = MAKE.parent
LAB = Path("/tmp/h_lab")
VENV = Path("/tmp/h_venv")
NODE_MODULES = Path("/tmp/h_node/node_modules")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
JDBC_JAR = Path("/usr/share/java/postgresql.jar")
AS_POSTGRES = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.3):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def now_ns() -> int:
    return time.time_ns()


def iso(ns: int, *, digits: int = 6, offset_h: float = 0.0, zulu: bool = True) -> str:
    """RFC 3339 text of ``ns`` in UTC (``Z`` or ``+00:00``) or in a fixed offset."""
    zone = dt.timezone(dt.timedelta(hours=offset_h))
    moment = dt.datetime.fromtimestamp(ns // 1_000_000_000, zone)
    fraction = f"{ns % 1_000_000_000:09d}"[:digits]
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if digits else "")
    if offset_h == 0 and zulu:
        return text + "Z"
    return text + moment.strftime("%z")[:3] + ":" + moment.strftime("%z")[3:]


class Lines:
    """JSON lines kept in memory and written once, in the order they were made."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        self.items.append({k: v for k, v in record.items() if v is not None})
        return record

    def write(self, path: Path) -> None:
        Lines.write_items(self.items, path)

    @staticmethod
    def write_items(items: list[dict[str, Any]], path: Path) -> None:
        text = "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in items)
        path.write_text(text, "utf-8")


def run(
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 300,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


class Lab:
    """One case's scratch directory and the processes started for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.root = LAB / name
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        os.chmod(self.root, 0o755)  # noqa: S103 - postgres and nobody must traverse it
        self._stops: list[Callable[[], None]] = []

    def defer(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def spawn(
        self, command: list[str], log: Path, *, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a long-running process (its own session), stopped at close."""
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )

        def stop() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

        self.defer(stop)
        return proc

    def close(self) -> None:
        while self._stops:
            stop = self._stops.pop()
            try:
                stop()
            except Exception as exc:
                print(f"{self.name}: stop failed: {exc!r}")


class Pg:
    """A throwaway PostgreSQL 15 cluster logging ``csvlog`` (initdb/pg_ctl as ``postgres``)."""

    def __init__(self, lab: Lab, name: str, port: int, settings: dict[str, str] | None = None):
        self.lab = lab
        self.root = lab.root / name
        self.port = port
        self.settings = settings or {}
        self.mark = 0

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def csv(self) -> Path:
        return self.root / "log" / "postgresql.csv"

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([*AS_POSTGRES, str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args], check=check)

    def _options(self) -> str:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "logging_collector": "on",
            "log_destination": "csvlog",
            "log_directory": str(self.root / "log"),
            "log_filename": "postgresql.log",
            "log_file_mode": "0644",
            "log_timezone": "UTC",
            "timezone": "UTC",
            "lc_messages": "C",
            **self.settings,
        }
        return " ".join(f"-c {key}={value}" for key, value in settings.items())

    def init(self) -> None:
        (self.root / "log").mkdir(parents=True)
        if AS_POSTGRES:
            for path in (self.root, self.root / "log"):
                shutil.chown(path, user="postgres")
        run(
            [
                *AS_POSTGRES,
                str(PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )

    def init_standby(self, primary: Pg) -> None:
        """A streaming-replication standby of ``primary`` (``pg_basebackup -R``)."""
        (self.root / "log").mkdir(parents=True)
        if AS_POSTGRES:
            for path in (self.root, self.root / "log"):
                shutil.chown(path, user="postgres")
        run(
            [
                *AS_POSTGRES,
                str(PG_BIN / "pg_basebackup"),
                "-h",
                "127.0.0.1",
                "-p",
                str(primary.port),
                "-U",
                "postgres",
                "-D",
                str(self.data),
                "-R",
                "-X",
                "stream",
            ]
        )

    def start(self) -> None:
        self._ctl("-o", self._options(), "-l", str(self.root / "server.log"), "-w", "start")
        self.lab.defer(lambda: self._ctl("-m", "immediate", "-w", "stop", check=False))

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self._ctl(
            "-m", mode, "-o", self._options(), "-l", str(self.root / "server.log"), "-w", "restart"
        )

    def psql(self, sql: str, *, db: str = "postgres", app: str = "psql") -> str:
        done = run(
            [
                "psql",
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                f"host=127.0.0.1 port={self.port} user=postgres dbname={db} application_name={app}",
                "-c",
                sql,
            ]
        )
        return done.stdout.strip()

    def set_mark(self) -> None:
        """Lines written so far (start-up, schema) are not evidence."""
        time.sleep(0.3)
        self.mark = self.csv.stat().st_size if self.csv.exists() else 0

    def evidence(self) -> str:
        time.sleep(0.5)
        return self.csv.read_bytes()[self.mark :].decode()


class Nginx:
    """nginx run as ``nginx -p PREFIX -c CONF`` in the foreground, workers as ``nobody``."""

    def __init__(self, lab: Lab, name: str = "nginx") -> None:
        self.lab = lab
        self.prefix = lab.root / name
        (self.prefix / "logs").mkdir(parents=True)
        (self.prefix / "temp").mkdir()
        self.marks = {"access.log": 0, "error.log": 0}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> Path:
        return self.prefix / "nginx.conf"

    def write(self, http_body: str, *, error_level: str = "warn") -> None:
        user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
        temp = self.prefix / "temp"
        self.conf.write_text(
            f"""{user}worker_processes 1;
daemon off;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/logs/error.log {error_level};
events {{ worker_connections 128; }}
http {{
    client_body_temp_path {temp}/client_body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{http_body}
}}
"""
        )

    def start(self, http_body: str, port: int, *, error_level: str = "warn") -> None:
        self.write(http_body, error_level=error_level)
        base = ["/usr/sbin/nginx", "-p", str(self.prefix), "-c", str(self.conf)]
        base += ["-e", str(self.prefix / "logs" / "error.log")]
        run([*base, "-t"])
        self.proc = self.lab.spawn(base, self.prefix / "stdout.log")
        wait_listening(port)

    def reload(self, http_body: str, *, error_level: str = "warn") -> None:
        self.write(http_body, error_level=error_level)
        pid = int((self.prefix / "nginx.pid").read_text().strip())
        os.kill(pid, signal.SIGHUP)
        time.sleep(1.0)

    def set_marks(self) -> None:
        for name in self.marks:
            path = self.prefix / "logs" / name
            self.marks[name] = path.stat().st_size if path.exists() else 0

    def evidence(self, name: str) -> str:
        time.sleep(0.3)
        path = self.prefix / "logs" / name
        return path.read_bytes()[self.marks[name] :].decode() if path.exists() else ""


class Blackhole:
    """A socket that completes TCP handshakes (the kernel's backlog) and never answers."""

    def __init__(self, lab: Lab, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        lab.defer(self.sock.close)


def node_env() -> dict[str, str]:
    return {"NODE_PATH": str(NODE_MODULES)}


def go_build(source: Path, out: Path) -> Path:
    """Build a stdlib-only Go program (GOPATH mode, no modules)."""
    run(
        ["go", "build", "-o", str(out), str(source)],
        env={"GO111MODULE": "off", "GOCACHE": "/tmp/h_gocache", "GOFLAGS": ""},
    )
    return out


def go_request(
    binary: Path,
    method: str,
    url: str,
    *,
    body: str = "",
    timeout_s: float = 5.0,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One request by the Go client: ``{start_ns, end_ns, status, error, body}``."""
    args = [str(binary), "-method", method, "-url", url, "-timeout", f"{timeout_s}s"]
    if body:
        args += ["-body", body]
    for key, value in (headers or {}).items():
        args += ["-header", f"{key}: {value}"]
    done = run(args, check=False, timeout_s=timeout_s + 30)
    return json.loads(done.stdout)


def background(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def write_truth(folder: Path, truth: dict[str, Any]) -> None:
    (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", "utf-8")


def fresh_case(name: str) -> Path:
    folder = HOLDOUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder

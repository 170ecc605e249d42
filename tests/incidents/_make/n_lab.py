"""Machinery shared by the ``n-*`` incident generators (``n_cases.py``).

Everything here runs real programs on 127.0.0.1 so that the evidence is what they write:

- a local certificate authority (``cryptography``) issuing valid, expired, wrong-host and
  foreign-CA certificates;
- Debian's nginx (``nginx -p PREFIX -c CONF``) with a JSON or ``combined`` + ``$request_id``
  access log and an error log;
- a throwaway PostgreSQL 15 cluster (``initdb``/``pg_ctl`` as the ``postgres`` user) logging
  ``csvlog`` or ``jsonlog``;
- a small provisioning API (stdlib ``http.server`` + ``psycopg``) that does NOT use
  ``agent_logging``: it writes its own JSON lines, with the keys of the record schema but no
  ``error.owner_layer``, and real exception text and tracebacks;
- HTTP clients in Go (``n_goclient.go``), Java (``NJavaClient.java``), curl and Python
  (``httpx``) whose real error text the fake "services" log.

Service records are written by :class:`JsonLog`, in the style of the language the service is
written in (Python ``logging``/structlog JSON, Go ``zap``, Java logback JSON), optionally
with a clock ``skew_s`` (the host's clock being off: a constant added to the stamps).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
INCIDENTS = HERE.parent
BIN = Path("/tmp/n-lab-bin")
PG_BIN = Path(sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1])
AS_POSTGRES = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


# --------------------------------------------------------------------------- time, ports


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stamp(ns: int, digits: int = 9, zulu: bool = True) -> str:
    """RFC 3339 text of ``ns`` (UTC) with ``digits`` fractional digits."""
    seconds, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if digits:
        base += "." + f"{frac:09d}"[:digits]
    return base + ("Z" if zulu else "+00:00")


# --------------------------------------------------------------------------- JSON lines


class JsonLog:
    """A service's JSON-lines log, in one language's style.

    Styles:
        ``py``: ``{"ts", "level", "event", "service", "layer", ...}`` (microseconds, +00:00);
        ``structlog``: like ``py`` with nanosecond ``Z`` stamps;
        ``zap``: ``{"level", "ts", "caller", "msg", ...}`` (milliseconds, Z);
        ``java``: ``{"ts", "level" upper case, "thread", "logger", "message", ...}``.
    """

    def __init__(
        self,
        path: Path,
        *,
        service: str,
        layer: str,
        style: str = "py",
        skew_s: float = 0.0,
        **static: Any,
    ) -> None:
        self.path = path
        self.service = service
        self.layer = layer
        self.style = style
        self.skew_ns = int(skew_s * 1e9)
        self.static = static
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, level: str, text: str, *, ago_s: float = 0.0, **fields: Any) -> None:
        """Write one record; ``ago_s`` backdates it (an event from before the run)."""
        ns = time.time_ns() + self.skew_ns - int(ago_s * 1e9)
        record: dict[str, Any]
        if self.style == "zap":
            record = {"level": level, "ts": stamp(ns, 3)}
            if "caller" in fields:
                record["caller"] = fields.pop("caller")
            record["msg"] = text
            record.update(service=self.service, layer=self.layer)
        elif self.style == "java":
            record = {
                "ts": stamp(ns, 3),
                "level": level.upper(),
                "thread": fields.pop("thread", "main"),
                "logger": fields.pop("logger", self.service),
                "message": text,
                "service": self.service,
                "layer": self.layer,
            }
        else:
            digits, zulu = (6, False) if self.style == "py" else (9, True)
            record = {"ts": stamp(ns, digits, zulu), "level": level, "event": text}
            record.update(service=self.service, layer=self.layer)
        record.update(self.static)
        record.update({k: v for k, v in fields.items() if v is not None})
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


class Transitions:
    """A workflow engine's state-transition stream (the ``workflow`` source kind)."""

    def __init__(self, path: Path, service: str) -> None:
        self.path = path
        self.service = service

    def __call__(
        self, entity_id: str, old: str | None, new: str, *, ago_s: float = 0.0, **fields: Any
    ) -> None:
        ns = time.time_ns() - int(ago_s * 1e9)
        record: dict[str, Any] = {"ts": stamp(ns, 6), "entity_kind": "allocation"}
        record["entity_id"] = entity_id
        if old is not None:
            record["from"] = old
        record["to"] = new
        attributes = fields.pop("attributes", None)
        if attributes:
            record["attributes"] = attributes
        record.update({k: v for k, v in fields.items() if v is not None})
        record["service"] = self.service
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def error_of(exc: BaseException) -> dict[str, Any]:
    """``{"type", "message"}`` of an exception, its type as ``module.Qualname``."""
    kind = type(exc)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    return {"type": name, "message": str(exc)}


def chain_of(exc: BaseException) -> list[dict[str, Any]]:
    """The causes of ``exc`` (``__cause__``/``__context__``), innermost last."""
    causes = []
    current = exc.__cause__ or exc.__context__
    while current is not None:
        causes.append(error_of(current))
        current = current.__cause__ or current.__context__
    return causes


def stack_of(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


# --------------------------------------------------------------------------- certificates


class CA:
    """A certificate authority: an EC key and a self-signed certificate."""

    def __init__(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        public = self.key.public_key()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=400))
            .not_valid_after(now + dt.timedelta(days=3000))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / f"{re.sub(r'[^a-z0-9]+', '-', name.lower())}.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        stem: str,
        hosts: list[str],
        *,
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
    ) -> tuple[Path, Path]:
        """A server certificate for ``hosts``; returns (cert, key) PEM paths."""
        now = dt.datetime.now(dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - dt.timedelta(days=30))
            .not_valid_after(not_after or now + dt.timedelta(days=60))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        cert_path = self.directory / f"{stem}.crt"
        key_path = self.directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_path, key_path


# --------------------------------------------------------------------------- nginx

LOG_FORMATS = r"""
    log_format json_ingress escape=json '{"time_iso8601":"$time_iso8601","msec":"$msec",'
        '"request_id":"$request_id","remote_addr":"$remote_addr",'
        '"request_method":"$request_method","request_uri":"$request_uri","status":"$status",'
        '"request_time":"$request_time","upstream_status":"$upstream_status",'
        '"upstream_addr":"$upstream_addr","upstream_response_time":"$upstream_response_time",'
        '"body_bytes_sent":"$body_bytes_sent","server_name":"$server_name",'
        '"http_user_agent":"$http_user_agent","ssl_protocol":"$ssl_protocol"}';
    log_format combined_rid '$remote_addr - $remote_user [$time_local] "$request" '
        '$status $body_bytes_sent "$http_referer" "$http_user_agent" "$request_id"';
    log_format combined_rid_up '$remote_addr - $remote_user [$time_local] "$request" '
        '$status $body_bytes_sent "$http_referer" "$http_user_agent" "$request_id" '
        'rt=$request_time us=$upstream_status ua=$upstream_addr urt=$upstream_response_time';
"""


class Nginx:
    """One nginx master in ``prefix``, run in the foreground of its own session."""

    def __init__(self, prefix: Path, *, error_level: str = "warn") -> None:
        self.prefix = prefix
        self.error_level = error_level
        self.process: subprocess.Popen[bytes] | None = None
        self.mark = 0  # error-log size once started: the start-up notices are not evidence
        self.access_snapshot = b""
        self.error_snapshot = b""
        for name in ("logs", "temp"):
            (prefix / name).mkdir(parents=True, exist_ok=True)

    @property
    def access_log(self) -> Path:
        return self.prefix / "logs" / "access.log"

    @property
    def error_log(self) -> Path:
        return self.prefix / "logs" / "error.log"

    def write(self, body: str, *, access_format: str) -> None:
        user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
        temp = self.prefix / "temp"
        conf = f"""{user}worker_processes 1;
daemon off;
pid {self.prefix}/nginx.pid;
error_log {self.error_log} {self.error_level};
events {{ worker_connections 256; }}
http {{
{LOG_FORMATS}
    access_log {self.access_log} {access_format};
    client_body_temp_path {temp}/client_body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{body}
}}
"""
        (self.prefix / "nginx.conf").write_text(conf)

    def start(self, body: str, *, access_format: str, port: int) -> None:
        self.write(body, access_format=access_format)
        base = ["nginx", "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf")]
        base += ["-e", str(self.error_log)]
        checked = subprocess.run([*base, "-t"], capture_output=True, text=True, check=False)
        if checked.returncode != 0:
            raise RuntimeError(checked.stderr)
        self.process = subprocess.Popen(
            base,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TZ": "UTC"},
        )
        wait_listening(port)
        time.sleep(0.3)
        self.mark = self.error_log.stat().st_size if self.error_log.exists() else 0

    def reload(self, body: str, *, access_format: str) -> None:
        self.write(body, access_format=access_format)
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)
        time.sleep(1.0)

    def stop(self) -> None:
        """Snapshot the logs (access log whole, error log from the mark), then stop."""
        if self.process is not None and self.process.poll() is None:
            time.sleep(0.3)
            if self.access_log.exists():
                self.access_snapshot = self.access_log.read_bytes()
            if self.error_log.exists():
                self.error_snapshot = self.error_log.read_bytes()[self.mark :]
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_listening(port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.3):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


# --------------------------------------------------------------------------- PostgreSQL

SCHEMA = """
CREATE TABLE nodes (node_id text PRIMARY KEY, state text NOT NULL DEFAULT 'available',
                    allocation_id text, updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE allocations (id text PRIMARY KEY, node_id text NOT NULL REFERENCES nodes,
                          tenant text NOT NULL, state text NOT NULL, workflow_id text,
                          updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE tasks (id bigserial PRIMARY KEY, allocation_id text NOT NULL,
                    workflow_id text NOT NULL, node_id text NOT NULL, kind text NOT NULL,
                    state text NOT NULL DEFAULT 'queued', result jsonb,
                    claimed_at timestamptz);
GRANT ALL ON ALL TABLES IN SCHEMA public TO provisioning;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO provisioning;
"""


class Pg:
    """A throwaway PostgreSQL cluster logging ``csvlog`` or ``jsonlog``."""

    def __init__(
        self,
        root: Path,
        *,
        log_format: str = "csvlog",
        scram: bool = False,
        port: int | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.log_format = log_format
        self.scram = scram
        self.port = port or free_port()
        self.settings = settings or {}
        self.password = "s3cr3t-2026-10"
        self.mark = 0  # log size once set up: start-up lines are not evidence
        self.log_snapshot = b""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return (
            self.root
            / "log"
            / ("postgresql.csv" if self.log_format == "csvlog" else "postgresql.json")
        )

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*AS_POSTGRES, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr}")
        return done

    def start(self, *, init: bool = True) -> None:
        if init:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "log").mkdir(exist_ok=True)
            if os.geteuid() == 0:
                for path in (self.root, self.root / "log"):
                    shutil.chown(path, user="postgres")
            auth = [
                "--auth-local=trust",
                "--auth-host=scram-sha-256" if self.scram else "--auth-host=trust",
            ]
            self._run(
                str(PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                *auth,
                "-E",
                "UTF8",
                "--no-sync",
            )
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "fsync": "off",
            "logging_collector": "on",
            "log_destination": self.log_format,
            "log_directory": str(self.root / "log"),
            "log_filename": "postgresql.log",
            "log_file_mode": "0644",
            "log_rotation_age": "0",
            "log_rotation_size": "0",
            "log_timezone": "UTC",
            "timezone": "UTC",
            **self.settings,
        }
        options = " ".join(f"-c {key}={value}" for key, value in settings.items())
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        if init:
            with self.admin("provisioning-setup") as conn:
                conn.execute("SET log_statement = 'none'")
                conn.execute(f"CREATE ROLE provisioning LOGIN PASSWORD '{self.password}'")
                conn.execute("CREATE DATABASE provisioning OWNER provisioning")
            with self.admin("provisioning-setup", dbname="provisioning") as conn:
                conn.execute("SET log_statement = 'none'")
                conn.execute(SCHEMA)
                # Task ids of a server that has been running for a while.
                conn.execute(f"SELECT setval('tasks_id_seq', {random.randint(20000, 90000)})")
            time.sleep(0.5)
            self.mark = self.log_file.stat().st_size

    def admin(self, application: str, dbname: str = "postgres") -> psycopg.Connection[Any]:
        """A superuser connection over the Unix socket (trusted even with scram on TCP)."""
        return psycopg.connect(
            host=str(self.root),
            port=self.port,
            user="postgres",
            dbname=dbname,
            application_name=application,
            autocommit=True,
        )

    def dsn(self, password: str | None = None) -> str:
        pw = password if password is not None else self.password
        return (
            f"host=127.0.0.1 port={self.port} dbname=provisioning user=provisioning password={pw}"
        )

    def stop(self, mode: str = "fast") -> None:
        """Snapshot the log from the mark, then stop the server."""
        if self.log_file.exists():
            time.sleep(0.5)
            self.log_snapshot = self.log_file.read_bytes()[self.mark :]
        if self.data.exists():
            self._run(
                str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False
            )


def tagged(statement: str, **ids: str | None) -> str:
    """``statement`` with a sqlcommenter comment of ``ids`` appended (the spec's placement)."""
    return statement + sqlc(**ids)


def sqlc(**ids: str | None) -> str:
    """A sqlcommenter comment (https://google.github.io/sqlcommenter/spec/) of ``ids``."""
    pairs = [f"{k}='{v}'" for k, v in sorted(ids.items()) if v]
    return f" /*{','.join(pairs)}*/" if pairs else ""


# --------------------------------------------------------------------------- servers


class Request:
    def __init__(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        self.method = handler.command
        self.path = handler.path
        self.headers = {k.lower(): v for k, v in handler.headers.items()}
        self.body = json.loads(body) if body else None


Handler = Callable[[Request], tuple[int, dict[str, Any] | None]]


class HttpServer:
    """A threaded HTTP(S) server calling ``handler(request) -> (status, json_body)``."""

    def __init__(self, port: int, handler: Handler, *, tls: tuple[Path, Path] | None = None):
        self.port = port
        outer = handler

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "uvicorn"
            sys_version = ""

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = outer(Request(self, body))
                data = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Blackhole:
    """Accepts TCP connections and never answers (a stale backend address held by a dead LB)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                self.held.append(conn)

    def stop(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


class NxdomainDns:
    """A UDP DNS server on 127.0.0.1 answering every query with NXDOMAIN (RCODE 3)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", port))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                data, peer = self.sock.recvfrom(512)
                if len(data) < 12:
                    continue
                flags = 0x8183 | (int.from_bytes(data[2:4], "big") & 0x0100)
                # Header: same id, QR+RD+RA, RCODE 3; the question echoed, no answers.
                reply = data[:2] + flags.to_bytes(2, "big") + data[4:6] + b"\0\0\0\0\0\0"
                reply += data[12:]
                self.sock.sendto(reply, peer)

    def stop(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- clients


def build_clients() -> None:
    """Compile the Go and Java clients once (cached in /tmp/n-lab-bin)."""
    BIN.mkdir(parents=True, exist_ok=True)
    if not (BIN / "n_goclient").exists():
        subprocess.run(
            ["go", "build", "-o", str(BIN / "n_goclient"), str(HERE / "n_goclient.go")],
            check=True,
            env={**os.environ, "GOCACHE": str(BIN / "gocache")},
        )
    if not (BIN / "java" / "NJavaClient.class").exists():
        subprocess.run(
            ["javac", "-d", str(BIN / "java"), str(HERE / "NJavaClient.java")], check=True
        )


def go_request(
    method: str,
    url: str,
    *,
    ca: Path | None = None,
    timeout_s: float = 10.0,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One request with Go's net/http: ``{"status", "status_text", "body", "headers"}`` or
    ``{"error": err.Error()}``."""
    args = [
        str(BIN / "n_goclient"),
        method,
        url,
        str(ca or ""),
        str(timeout_s),
        json.dumps(body) if body is not None else "",
    ]
    args += [f"{k}:{v}" for k, v in (headers or {}).items()]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def java_request(
    method: str,
    url: str,
    *,
    ca: Path | None = None,
    timeout_s: float = 10.0,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One request with java.net.http: ``{"status", "body", "headers"}`` or
    ``{"error": e.toString(), "stack": printStackTrace}``."""
    args = [
        "java",
        "-cp",
        str(BIN / "java"),
        "NJavaClient",
        method,
        url,
        str(ca or ""),
        str(timeout_s),
        json.dumps(body) if body is not None else "",
    ]
    args += [f"{k}:{v}" for k, v in (headers or {}).items()]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def curl_request(args: list[str]) -> tuple[int, str, str]:
    """Run curl; returns (exit code, stdout, stderr)."""
    done = subprocess.run(["curl", *args], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr.strip()


# --------------------------------------------------------------------------- the lab


class Lab:
    """One case's scratch directory and output folder."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.root = Path(tempfile.mkdtemp(prefix=f"n-lab-{name}-"))
        self.root.chmod(0o755)
        self.out = INCIDENTS / name
        if self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True)
        self._stops: list[Callable[[], None]] = []
        self.kinds: dict[str, str] = {}  # evidence file -> its correlator source kind

    def defer(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def close(self) -> None:
        for stop in reversed(self._stops):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def save(self, data: bytes, name: str) -> None:
        """Write a snapshot of an nginx or PostgreSQL log (named ``nginx*``/``postgres*``)."""
        (self.out / name).write_bytes(data)
        self.kinds[name] = "nginx" if name.startswith("nginx") else "postgres"

    def log(self, name: str, **kwargs: Any) -> JsonLog:
        self.kinds[name] = "ndjson"
        return JsonLog(self.out / name, **kwargs)

    def transitions(self, name: str, service: str) -> Transitions:
        self.kinds[name] = "workflow"
        return Transitions(self.out / name, service)

    def sources(self) -> dict[str, str]:
        """The "sources" entries of truth.json: files whose name does not tell their kind."""
        return {
            name: kind
            for name, kind in sorted(self.kinds.items())
            if re.split(r"[.\-_]", name, maxsplit=1)[0] != kind
        }

    def nginx(self, error_level: str = "warn") -> Nginx:
        server = Nginx(self.root / "nginx", error_level=error_level)
        self.defer(server.stop)
        return server

    def pg(self, **kwargs: Any) -> Pg:
        cluster = Pg(self.root / "pg", **kwargs)
        self.defer(cluster.stop)
        return cluster


@contextlib.contextmanager
def lab(name: str) -> Iterator[Lab]:
    build_clients()
    the_lab = Lab(name)
    try:
        yield the_lab
    finally:
        the_lab.close()


def versions() -> dict[str, str]:
    """The versions of the programs that wrote evidence, for truth.json notes."""

    def first(cmd: list[str]) -> str:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return (done.stdout or done.stderr).strip().splitlines()[0]

    return {
        "nginx": first(["nginx", "-v"]).removeprefix("nginx version: "),
        "postgres": first([str(PG_BIN / "postgres"), "--version"]),
        "go": " ".join(first(["go", "version"]).split()[2:3]).replace("go", "Go ", 1),
        "java": "OpenJDK " + first(["java", "-version"]).split('"')[1],
        "curl": " ".join(first(["curl", "--version"]).split()[:2]),
        "python": first(["python3", "--version"]),
        "httpx": "httpx " + __import__("httpx").__version__,
        "psycopg": "psycopg " + psycopg.__version__,
    }


def write_truth(out: Path, truth: dict[str, Any]) -> None:
    (out / "truth.json").write_text(json.dumps(truth, indent=2, ensure_ascii=False) + "\n")

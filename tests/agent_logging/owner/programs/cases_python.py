"""Python 3.11 captures: each case makes a real library fail against the environment.

Every case returns the exception it caught; :func:`run` turns it into a fixture entry with
``type`` = the module-qualified class name (builtins bare) and ``message`` = ``str(exc)``.
"""

from __future__ import annotations

import asyncio
import importlib
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import requests
import urllib3
from env import PG_APP_PASSWORD, PG_SUPERUSER_PASSWORD

PY = f"Python {sys.version.split()[0]}"
VERSIONS = {
    "httpx": httpx.__version__,
    "requests": requests.__version__,
    "urllib3": urllib3.__version__,
    "psycopg": psycopg.__version__,
}
HERE = "tests/agent_logging/owner/programs/cases_python.py"


def type_name(exc: BaseException) -> str:
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _raises(action: Callable[[], Any]) -> BaseException:
    try:
        action()
    except BaseException as exc:
        return exc
    raise RuntimeError("expected a failure, got none")


def _tls_connect(port: int, cafile: str | None, host: str = "127.0.0.1") -> None:
    context = ssl.create_default_context(cafile=cafile)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host),
    ):
        pass


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None) or getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def _pg_conninfo(
    port: int, user: str = "app", password: str = PG_APP_PASSWORD, db: str = "wording"
) -> str:
    return (
        f"host=127.0.0.1 port={port} user={user} password={password} dbname={db} connect_timeout=5"
    )


def _lock_timeout(port: int) -> None:
    with (
        psycopg.connect(_pg_conninfo(port)) as holder,
        psycopg.connect(_pg_conninfo(port)) as waiter,
    ):
        holder.execute("SELECT * FROM items WHERE id = 1 FOR UPDATE")
        waiter.execute("SET lock_timeout = '500ms'")
        waiter.execute("UPDATE items SET value = 'x' WHERE id = 1")


def _deadlock(port: int) -> None:
    """Two transactions lock rows 1 and 2 in opposite orders; PostgreSQL aborts one."""
    first = psycopg.connect(_pg_conninfo(port))
    second = psycopg.connect(_pg_conninfo(port))
    errors: list[BaseException] = []
    try:
        first.execute("UPDATE items SET value = 'f' WHERE id = 1")
        second.execute("UPDATE items SET value = 's' WHERE id = 2")

        def crossing(conn: psycopg.Connection[Any], row: int) -> None:
            try:
                conn.execute("UPDATE items SET value = 'c' WHERE id = %s", (row,))
            except psycopg.Error as exc:
                errors.append(exc)
                conn.rollback()

        thread = threading.Thread(target=crossing, args=(first, 2))
        thread.start()
        crossing(second, 1)
        thread.join(timeout=30)
    finally:
        first.close()
        second.close()
    raise errors[0]


def _statement_timeout(port: int) -> None:
    with psycopg.connect(_pg_conninfo(port)) as conn:
        conn.execute("SET statement_timeout = '200ms'")
        conn.execute("SELECT pg_sleep(2)")


def _terminated(port: int) -> None:
    with (
        psycopg.connect(_pg_conninfo(port)) as victim,
        psycopg.connect(
            _pg_conninfo(port, "postgres", PG_SUPERUSER_PASSWORD, "postgres"), autocommit=True
        ) as admin,
    ):
        pid = victim.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        victim.execute("SELECT 1")


def _write_full(directory: str) -> None:
    with (Path(directory) / "agent.spool").open("w") as stream:
        stream.write("spool record\n" * 1024)
        stream.flush()


def _write_read_only(directory: str) -> None:
    (Path(directory) / "agent.spool").write_text("spool record\n")


def cases(env: dict[str, Any]) -> list[dict[str, Any]]:
    """(id, owner, program, how, layer, callable) for every Python capture."""
    p = env["ports"]
    ca = env["ca"]
    root = Path(env["root"])
    notexec = root / "bin" / "power-cycle.sh"
    notexec.parent.mkdir(exist_ok=True)
    notexec.write_text("#!/bin/sh\necho cycled\n")
    notexec.chmod(0o644)
    https = {
        name: f"https://127.0.0.1:{p[name]}/"
        for name in ("valid", "expired", "wronghost", "selfsigned")
    }
    closed = f"http://127.0.0.1:{p['closed']}/api/allocations"
    api = f"http://127.0.0.1:{p['ingress']}/api"
    ingress = f"http://127.0.0.1:{p['ingress']}"
    h = httpx.Client(verify=ssl.create_default_context(cafile=ca), timeout=10)
    raw_ssl = "ssl.create_default_context(cafile=ca.pem).wrap_socket(server_hostname='127.0.0.1')"

    def httpx_status(url: str) -> None:
        h.get(url).raise_for_status()

    def requests_status(url: str) -> None:
        requests.get(url, timeout=10).raise_for_status()

    pool = urllib3.PoolManager(ca_certs=ca, timeout=5)
    pool_no_retry = urllib3.PoolManager(ca_certs=ca, timeout=5, retries=False)
    s_server = "`openssl s_server -www` serving"
    table: list[tuple[str, str, str, str, str, Callable[[], Any]]] = [
        # ssl
        (
            "py-ssl-expired",
            "cert",
            f"{PY} ssl",
            f"{raw_ssl} against {s_server} the CA's expired cert",
            "workflow",
            lambda: _tls_connect(p["expired"], ca),
        ),
        (
            "py-ssl-selfsigned",
            "cert",
            f"{PY} ssl",
            f"{raw_ssl} against {s_server} a self-signed cert",
            "workflow",
            lambda: _tls_connect(p["selfsigned"], ca),
        ),
        (
            "py-ssl-unknown-ca",
            "cert",
            f"{PY} ssl",
            f"ssl.create_default_context() (system CAs only) against {s_server} the local CA's "
            "valid cert",
            "workflow",
            lambda: _tls_connect(p["valid"], None),
        ),
        (
            "py-ssl-hostname",
            "cert",
            f"{PY} ssl",
            f"{raw_ssl} against {s_server} a cert for wrong.example",
            "workflow",
            lambda: _tls_connect(p["wronghost"], ca),
        ),
        (
            "py-ssl-wrong-version",
            None,
            f"{PY} ssl",
            "ssl wrap_socket against the plain-HTTP ingress port (TLS spoken to a plaintext port)",
            "workflow",
            lambda: _tls_connect(p["ingress"], ca),
        ),
        # socket and asyncio
        (
            "py-socket-refused",
            "ingress",
            f"{PY} socket",
            "socket.create_connection(('127.0.0.1', CLOSED_PORT))",
            "workflow",
            lambda: socket.create_connection(("127.0.0.1", p["closed"]), timeout=5),
        ),
        (
            "py-asyncio-refused",
            "ingress",
            f"{PY} asyncio",
            "asyncio.open_connection('127.0.0.1', CLOSED_PORT)",
            "workflow",
            lambda: asyncio.run(asyncio.open_connection("127.0.0.1", p["closed"])),
        ),
        (
            "py-socket-dns",
            "ingress",
            f"{PY} socket",
            "socket.getaddrinfo('nosuch.invalid', 443)",
            "workflow",
            lambda: socket.getaddrinfo("nosuch.invalid", 443),
        ),
        # subprocess and imports
        (
            "py-subprocess-missing-racadm",
            "deploy",
            f"{PY} subprocess",
            "subprocess.run(['racadm', 'serveraction', 'powerstatus']) with racadm not installed",
            "node",
            lambda: subprocess.run(["racadm", "serveraction", "powerstatus"], check=True),
        ),
        (
            "py-subprocess-not-executable",
            "deploy",
            f"{PY} subprocess",
            "subprocess.run([script]) on a script installed with mode 0644",
            "node",
            lambda: subprocess.run([str(notexec)], check=True),
        ),
        (
            "py-subprocess-127",
            "deploy",
            f"{PY} subprocess",
            "subprocess.run('missing-cmd --status', shell=True, check=True) (/bin/sh is dash)",
            "node",
            lambda: subprocess.run(  # noqa: S602 - the shell's own 127 is the point
                "missing-cmd --status", shell=True, check=True, capture_output=True
            ),
        ),
        (
            "py-module-not-found",
            "deploy",
            f"{PY} import",
            "importlib.import_module('pyghmi') (package not installed)",
            "node",
            lambda: importlib.import_module("pyghmi"),
        ),
        # httpx
        (
            "httpx-refused",
            "ingress",
            f"{PY} httpx {VERSIONS['httpx']}",
            "httpx.get() to a closed port",
            "workflow",
            lambda: h.get(closed),
        ),
        (
            "httpx-cert-expired",
            "cert",
            f"{PY} httpx {VERSIONS['httpx']}",
            f"httpx.get(verify=ca.pem) against {s_server} the CA's expired cert",
            "workflow",
            lambda: h.get(https["expired"]),
        ),
        (
            "httpx-401",
            "api_auth",
            f"{PY} httpx {VERSIONS['httpx']}",
            "httpx raise_for_status() on nginx proxying to a stub API answering 401",
            "workflow",
            lambda: httpx_status(f"{api}/v1/allocations"),
        ),
        (
            "httpx-403",
            "api_auth",
            f"{PY} httpx {VERSIONS['httpx']}",
            "httpx raise_for_status() on nginx proxying to a stub API answering 403",
            "workflow",
            lambda: httpx_status(f"{api}/v1/nodes"),
        ),
        (
            "httpx-502",
            "ingress",
            f"{PY} httpx {VERSIONS['httpx']}",
            "httpx raise_for_status() on nginx whose upstream port is closed (real 502)",
            "workflow",
            lambda: httpx_status(f"{ingress}/down/"),
        ),
        (
            "httpx-504",
            "ingress",
            f"{PY} httpx {VERSIONS['httpx']}",
            "httpx raise_for_status() on nginx with proxy_read_timeout 1s to a 3 s upstream (real "
            "504)",
            "workflow",
            lambda: httpx_status(f"{ingress}/slow/"),
        ),
        # requests
        (
            "requests-refused",
            "ingress",
            f"{PY} requests {VERSIONS['requests']}",
            "requests.get() to a closed port",
            "api",
            lambda: requests.get(closed, timeout=5),
        ),
        (
            "requests-dns",
            "ingress",
            f"{PY} requests {VERSIONS['requests']}",
            "requests.get('https://nosuch.invalid/')",
            "api",
            lambda: requests.get("https://nosuch.invalid/", timeout=5),
        ),
        (
            "requests-cert-expired",
            "cert",
            f"{PY} requests {VERSIONS['requests']}",
            f"requests.get(verify=ca.pem) against {s_server} the CA's expired cert",
            "api",
            lambda: requests.get(https["expired"], verify=ca, timeout=5),
        ),
        (
            "requests-cert-hostname",
            "cert",
            f"{PY} requests {VERSIONS['requests']}",
            f"requests.get(verify=ca.pem) against {s_server} a cert for wrong.example",
            "api",
            lambda: requests.get(https["wronghost"], verify=ca, timeout=5),
        ),
        (
            "requests-401",
            "api_auth",
            f"{PY} requests {VERSIONS['requests']}",
            "requests raise_for_status() on nginx proxying to a stub API answering 401",
            "api",
            lambda: requests_status(f"{api}/v1/allocations"),
        ),
        (
            "requests-502",
            "ingress",
            f"{PY} requests {VERSIONS['requests']}",
            "requests raise_for_status() on nginx whose upstream port is closed (real 502)",
            "api",
            lambda: requests_status(f"{ingress}/down/"),
        ),
        # urllib3 directly
        (
            "urllib3-refused-max-retries",
            "ingress",
            f"{PY} urllib3 {VERSIONS['urllib3']}",
            "urllib3.PoolManager().request() (default retries) to a closed port",
            "api",
            lambda: pool.request("GET", closed),
        ),
        (
            "urllib3-cert-expired-no-retry",
            "cert",
            f"{PY} urllib3 {VERSIONS['urllib3']}",
            f"urllib3.PoolManager(ca_certs=ca.pem, retries=False) against {s_server} the CA's "
            "expired cert",
            "api",
            lambda: pool_no_retry.request("GET", https["expired"]),
        ),
        # urllib.request (stdlib)
        (
            "urllib-refused",
            "ingress",
            f"{PY} urllib.request",
            "urllib.request.urlopen() to a closed port",
            "node",
            lambda: urllib.request.urlopen(closed, timeout=5),
        ),
        (
            "urllib-401",
            "api_auth",
            f"{PY} urllib.request",
            "urllib.request.urlopen() on nginx proxying to a stub API answering 401",
            "node",
            lambda: urllib.request.urlopen(f"{api}/v1/allocations", timeout=5),  # noqa: S310
        ),
    ]
    mounts = env["mounts"]
    if "full" in mounts:
        table.append(
            (
                "py-enospc",
                "node",
                f"{PY} io",
                "open().write() + flush() of 12 KiB into a full 16 KiB tmpfs",
                "node",
                lambda: _write_full(mounts["full"]),
            )
        )
    if "ro" in mounts:
        table.append(
            (
                "py-erofs",
                "node",
                f"{PY} pathlib",
                "Path.write_text() into a tmpfs mounted read-only",
                "node",
                lambda: _write_read_only(mounts["ro"]),
            )
        )
    if "pg" in p:
        pg = p["pg"]
        v = f"{PY} psycopg {VERSIONS['psycopg']}"
        table += [
            (
                "psycopg-refused",
                "db",
                v,
                "psycopg.connect() to a closed port on 127.0.0.1",
                "api",
                lambda: psycopg.connect(_pg_conninfo(p["closed"])),
            ),
            (
                "psycopg-auth-failed",
                "db",
                v,
                "psycopg.connect() with a wrong password to PostgreSQL 15 (scram-sha-256 in "
                "pg_hba.conf)",
                "api",
                lambda: psycopg.connect(_pg_conninfo(pg, password="wrong")),
            ),
            (
                "psycopg-no-database",
                "db",
                v,
                "psycopg.connect(dbname='provisioning') to PostgreSQL 15 where it was never "
                "created",
                "api",
                lambda: psycopg.connect(_pg_conninfo(pg, db="provisioning")),
            ),
            (
                "psycopg-lock-timeout",
                "db",
                v,
                "SET lock_timeout = '500ms', then UPDATE a row another session holds FOR UPDATE",
                "api",
                lambda: _lock_timeout(pg),
            ),
            (
                "psycopg-deadlock",
                "db",
                v,
                "two sessions UPDATE rows 1 and 2 in opposite orders",
                "api",
                lambda: _deadlock(pg),
            ),
            (
                "psycopg-statement-timeout",
                "db",
                v,
                "SET statement_timeout = '200ms'; SELECT pg_sleep(2)",
                "api",
                lambda: _statement_timeout(pg),
            ),
            (
                "psycopg-undefined-table",
                "db",
                v,
                "SELECT from a table that does not exist",
                "api",
                lambda: psycopg.connect(_pg_conninfo(pg)).execute(
                    "SELECT id, state FROM allocations WHERE id = 'a-7c21'"
                ),
            ),
            (
                "psycopg-terminated",
                "db",
                v,
                "the session is ended by pg_terminate_backend() from another session, then runs a "
                "query",
                "api",
                lambda: _terminated(pg),
            ),
        ]
    entries = []
    for ident, owner, program, how, layer, action in table:
        exc = _raises(action)
        entries.append(
            {
                "id": ident,
                "owner": owner,
                "program": program,
                "how": f"{HERE}: {how}",
                "type": type_name(exc),
                "message": str(exc),
                "stack": None,
                "status": _status(exc),
                "exit_code": getattr(exc, "returncode", None),
                "layer": layer,
            }
        )
    h.close()
    return entries

"""The database: a throwaway PostgreSQL cluster, its schema, and how services talk to it.

The cluster lives in ``DEVSTACK_DIR/pg`` and is started with the Debian binaries
(``initdb``/``pg_ctl``; run as the ``postgres`` user through ``runuser`` when we are root,
since PostgreSQL refuses to run as root), listening on 127.0.0.1 only. Its own log is what the
correlator reads for the db layer: ``logging_collector=on``, ``log_destination=jsonlog``
(PostgreSQL 15+), ``log_statement=all``, in UTC, never rotated.

Schema (``provisioning`` database): ``nodes`` (inventory and occupancy), ``allocations``
(state, a version for optimistic concurrency, the current provider job), ``allocation_audit``
(every state transition; the correlator's ``workflow`` source reads it), ``outbox``
(events the API hands to the workflow worker), ``tasks`` (work for node agents).

Every statement a service runs goes through :func:`sql`, which appends
``agent_logging.sql_comment()`` so PostgreSQL's log lines carry the identifiers.
"""

from __future__ import annotations

import glob
import os
import pwd
import queue
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, LiteralString

import psycopg

import agent_logging

__all__ = ["SCHEMA", "Cluster", "Pool", "connect", "find_binaries", "sql"]

_TIMEOUT_S: Final = 60

SCHEMA: Final = """
CREATE TABLE nodes (
    node_id text PRIMARY KEY,
    occupancy text NOT NULL DEFAULT 'free',
    allocation_id text
);
CREATE TABLE allocations (
    id text PRIMARY KEY,
    node_id text NOT NULL REFERENCES nodes,
    provider text NOT NULL,
    state text NOT NULL,
    occupancy text NOT NULL DEFAULT 'none',
    version integer NOT NULL DEFAULT 0,
    release_version integer,
    correlation_id text,
    workflow_id text,
    provision_workflow_id text,
    provision_job text,
    job text,
    task_id bigint,
    delete_requested boolean NOT NULL DEFAULT false,
    delete_requested_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE allocation_audit (
    id bigserial PRIMARY KEY,
    ts timestamptz NOT NULL DEFAULT clock_timestamp(),
    entity_kind text NOT NULL DEFAULT 'allocation',
    entity_id text NOT NULL,
    from_state text,
    to_state text NOT NULL,
    attributes jsonb NOT NULL DEFAULT '{}',
    allocation_id text,
    workflow_id text,
    node_id text,
    correlation_id text
);
CREATE TABLE outbox (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at timestamptz
);
CREATE TABLE tasks (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    node_id text NOT NULL,
    allocation_id text NOT NULL,
    workflow_id text NOT NULL,
    correlation_id text,
    state text NOT NULL DEFAULT 'queued',
    claimed_by text,
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


def sql(text: LiteralString) -> psycopg.sql.SQL:
    """``text`` with the current identifiers appended as a sqlcommenter comment.

    The comment is data, not structure: it goes in as a ``psycopg.sql.SQL`` literal only
    after ``%`` is doubled, so psycopg's placeholders stay the statement's own.
    """
    comment = agent_logging.sql_comment().replace("%", "%%")
    statement = f"{text} {comment}" if comment else text
    return psycopg.sql.SQL(statement)


def connect(dsn: str, application: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A connection named ``application`` (PostgreSQL logs it as ``application_name``)."""
    return psycopg.connect(dsn, application_name=application, autocommit=autocommit)


class Pool:
    """A few connections shared by a threaded service (one at a time per borrower)."""

    def __init__(self, dsn: str, application: str, size: int = 6) -> None:
        self._dsn = dsn
        self._application = application
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue(size)

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor inside one transaction, committed on success, rolled back on error."""
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = connect(self._dsn, self._application)
        try:
            with conn.transaction(), conn.cursor() as cursor:
                yield cursor
        except psycopg.OperationalError:
            conn.close()  # a broken connection is not given back
            raise
        try:
            self._idle.put_nowait(conn)
        except queue.Full:
            conn.close()


def find_binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: on PATH, else Debian's
    ``/usr/lib/postgresql/*/bin`` (newest first)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "pg_ctl").exists() and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


def _runner() -> list[str]:
    """The command prefix to run server binaries: as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root and runuser is missing (PostgreSQL refuses root)")
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise RuntimeError("running as root and there is no 'postgres' user") from exc
    return [runuser, "-u", "postgres", "--"]


class Cluster:
    """A PostgreSQL cluster in ``root`` (``data/``, ``log/``, the socket directory)."""

    def __init__(self, root: Path, bin_dir: Path, port: int) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = port

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [*_runner(), *args]
        return subprocess.run(  # noqa: S603 - our binaries, our arguments
            command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )

    def start(self) -> None:
        """initdb, start, create the ``provisioning`` database and its schema.

        Raises:
            RuntimeError: initdb or pg_ctl failed (their output is in the message).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "log").mkdir(exist_ok=True)
        if os.geteuid() == 0:
            for path in (self.root, self.root / "log"):
                shutil.chown(path, user="postgres")
        initdb = self._run(
            str(self.bin_dir / "initdb"),
            *("-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"),
            "--no-sync",
        )
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed: {initdb.stderr.strip()[-800:]}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "fsync": "off",
            "logging_collector": "on",
            "log_destination": "jsonlog",
            "log_directory": str(self.root / "log"),
            # jsonlog replaces the .log suffix with .json: log/postgresql.json.
            "log_filename": "postgresql.log",
            "log_file_mode": "0644",
            "log_rotation_age": "0",
            "log_rotation_size": "0",
            "log_statement": "all",
            "log_timezone": "UTC",
            "timezone": "UTC",
        }
        options = " ".join(f"-c {key}={value}" for key, value in settings.items())
        started = self._run(
            str(self.bin_dir / "pg_ctl"),
            *("-D", str(self.data), "-o", options, "-l", str(self.root / "server.log")),
            *("-w", "-t", str(_TIMEOUT_S), "start"),
        )
        if started.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()[-800:]}")
        admin = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with connect(admin, "devstack-setup") as conn:
            conn.execute("SET log_statement = 'none'")
            conn.execute("CREATE DATABASE provisioning")
        with connect(admin.replace("dbname=postgres", "dbname=provisioning"), "devstack") as conn:
            conn.execute("SET log_statement = 'none'")
            conn.execute(SCHEMA)

    def stop(self) -> None:
        """Stop the cluster (fast shutdown: sessions are ended, nothing is kept)."""
        if self.data.exists():
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")

"""A throwaway PostgreSQL cluster for integration tests (register with ``pytest_plugins``).

- ``postgres_dsn`` (session): starts a fresh cluster with ``initdb``/``pg_ctl`` on a temporary
  data directory, listening on 127.0.0.1 only on a free port, trust authentication, and yields
  a libpq DSN for its ``postgres`` database; stops the cluster and deletes the directory at the
  end of the session. Skips, saying why, when the PostgreSQL server binaries are not installed
  (Debian: ``apt-get install postgresql``) or cannot be run; in CI (``CI=true``) that fails
  instead (:func:`tests.real_parts.missing`).

PostgreSQL refuses to run as root; under root the binaries run as the ``postgres`` user via
``runuser``. Binaries are looked up on ``PATH``, then in ``/usr/lib/postgresql/*/bin``
(Debian/Ubuntu keep them off ``PATH``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.database import _runner as server_runner
from devstack.database import find_binaries
from tests.real_parts import missing
from tests.servers import free_port

__all__ = ["postgres_dsn"]

_START_TIMEOUT_S = 60


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=_START_TIMEOUT_S, check=False
    )


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN of a freshly started, throwaway PostgreSQL on 127.0.0.1."""
    bin_dir = find_binaries()
    if bin_dir is None:
        missing("PostgreSQL", "the server binaries (initdb, pg_ctl) are not installed")
    try:
        prefix = server_runner()
    except RuntimeError as exc:  # root without runuser or a postgres user
        missing("PostgreSQL", str(exc))
    root = Path(tempfile.mkdtemp(prefix="correlator-pg-"))
    data = root / "data"
    if prefix:
        shutil.chown(root, user="postgres")
    port = free_port()
    initdb = _run(
        [
            *prefix,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]
    )
    if initdb.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        missing("PostgreSQL", f"initdb failed: {initdb.stderr.strip()[-500:]}")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    started = _run(
        [
            *prefix,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            str(_START_TIMEOUT_S),
            "start",
        ]
    )
    if started.returncode != 0:
        log = (root / "server.log").read_text(errors="replace")[-1000:]
        shutil.rmtree(root, ignore_errors=True)
        missing("PostgreSQL", f"pg_ctl start failed: {started.stderr.strip()} {log}")
    try:
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        _run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"])
        shutil.rmtree(root, ignore_errors=True)

"""The real parts the integration tests drive, and what a test does when one is missing.

A test or fixture that needs a real part (a real Loki, PostgreSQL, nginx, Chromium, Node.js)
calls :func:`missing` where it used to call ``pytest.skip``. In CI (``CI=true``, as ``.ci/run``
runs) that is a failure naming the part and how to install it: a broken install must not turn
its tests into skips there. Anywhere else it is a skip with the same reason, so a developer
without the part still runs everything else.

A few parts cannot be had on this machine at all (:data:`NOT_AVAILABLE`): their tests call
:func:`not_available` and skip, in CI too, saying so.

The real Loki comes from ``../shared`` (beside the repository, also in CI's clone):
``shared/bin/loki`` (v3.7.6, built from Grafana's public source) and ``shared/loki/start-loki``,
which ``scripts/test.sh`` runs once for the whole suite and whose URL it exports as
``$LOKI_URL``. :func:`running_loki` starts a second one with a config of its own, for a test
that needs other than the stock limits (each such test says why).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final, NoReturn

import httpx
import pytest

from devstack.config import LOKI_URL_ENV
from devstack.supervisor import missing_binaries
from tests.servers import free_port

__all__ = [
    "CI_ENV",
    "INSTALL",
    "NOT_AVAILABLE",
    "SHARED",
    "in_ci",
    "loki_binary",
    "missing",
    "need_devstack_parts",
    "not_available",
    "real_loki_url",
    "running_loki",
]

CI_ENV: Final = "CI"
"""Set to ``true`` by CI (``.ci/run``): a missing real part fails instead of skipping."""

ROOT: Final = Path(__file__).resolve().parents[1]
SHARED: Final = ROOT.parent / "shared"
"""``../shared`` beside the repository (CI lays a copy beside its clone, without run bits)."""

INSTALL: Final[Mapping[str, str]] = {
    "Loki": (
        "bash scripts/test.sh starts one; by hand: "
        'eval "$(../shared/loki/start-loki)"; export LOKI_URL'
    ),
    "PostgreSQL": "apt-get install postgresql (bash scripts/system-deps.sh)",
    "nginx": "apt-get install nginx (bash scripts/system-deps.sh)",
    "Chromium": "apt-get install chromium (bash scripts/system-deps.sh)",
    "Node.js": "apt-get install nodejs npm (bash scripts/system-deps.sh)",
    "Playwright": "pip install -e '.[dev]' (bash scripts/setup.sh)",
    "PyYAML": "pip install -e '.[dev]' (bash scripts/setup.sh)",
}
"""Each real part a test may need, and how to get it."""

NOT_AVAILABLE: Final[Mapping[str, str]] = {
    "otelcol-contrib": (
        "the OpenTelemetry Collector (contrib) is a prebuilt download from GitHub: not on PyPI, "
        "npm or Debian, and Debian's Go (1.19) is too old to build it from its modules"
    ),
    "alloy": (
        "Grafana Alloy is a prebuilt download from GitHub or Grafana's apt repository: not on "
        "PyPI, npm or Debian"
    ),
}
"""Parts that cannot be installed on this machine (only PyPI, Debian and npm are reachable):
their tests skip, in CI too, until a binary is put on PATH."""


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, also ``1`` or ``yes``)."""
    return os.environ.get(CI_ENV, "").strip().lower() in {"true", "1", "yes"}


def missing(part: str, reason: str) -> NoReturn:
    """Fail (in CI) or skip (elsewhere): ``part`` (a key of :data:`INSTALL`) is missing or
    did not start, for ``reason``.

    Raises:
        pytest.fail.Exception: in CI.
        pytest.skip.Exception: elsewhere.
    """
    message = f"{part}: {reason} (to get it: {INSTALL[part]})"
    if in_ci():
        pytest.fail(f"CI=true and a real part is missing: {message}", pytrace=False)
    pytest.skip(message)


def need_devstack_parts() -> None:
    """:func:`missing` unless the devstack's real parts (nginx, PostgreSQL) are installed."""
    parts = {"nginx": "nginx", "postgresql": "PostgreSQL"}
    for package in missing_binaries():  # Debian package names
        missing(parts[package], f"the devstack needs the Debian package {package}")


def not_available(part: str) -> NoReturn:
    """Skip, in CI too: ``part`` (a key of :data:`NOT_AVAILABLE`) cannot be had here."""
    pytest.skip(f"{part} is not on PATH and not available on this machine: {NOT_AVAILABLE[part]}")


def real_loki_url() -> str:
    """``$LOKI_URL``, the real Loki of the run; :func:`missing` when it is not set."""
    url = os.environ.get(LOKI_URL_ENV, "").rstrip("/")
    if not url:
        missing("Loki", f"{LOKI_URL_ENV} is not set: no real Loki to test against")
    return url


def loki_binary(scratch: Path) -> Path:
    """The Loki binary: ``../shared/bin/loki`` (the version the suite pins), else ``loki`` on
    PATH; :func:`missing` without either.

    ``shared/`` may be laid without its run bits (CI's copy is): then a copy in ``scratch``
    is made executable, as ``start-loki`` does.
    """
    shipped = SHARED / "bin" / "loki"
    if shipped.is_file():
        if os.access(shipped, os.X_OK):
            return shipped
        runnable = scratch / "loki"
        if not runnable.exists():
            shutil.copyfile(shipped, runnable)
            runnable.chmod(0o755)
        return runnable
    on_path = shutil.which("loki")
    if on_path is None:
        missing("Loki", f"neither {shipped} nor `loki` on PATH")
    return Path(on_path)


@contextlib.contextmanager
def running_loki(
    binary: Path,
    config: Path,
    data_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 90.0,
) -> Iterator[str]:
    """Run ``binary -config.file=config`` on free 127.0.0.1 ports until the block ends; yields
    its base URL once ``/ready`` answers. Loki's log is ``data_dir/loki.log``.

    Raises:
        RuntimeError: Loki exited or did not get ready within ``timeout_s`` (the message ends
            with its log). A failure everywhere, not a skip: the binary is at hand, so what
            fails is the config or the machine, which is what the test is there to find.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port = free_port(), free_port()
    log = data_dir / "loki.log"
    command = [
        str(binary),
        f"-config.file={config}",
        "-config.expand-env=true",
        f"-server.http-listen-port={http_port}",
        f"-server.grpc-listen-port={grpc_port}",
        f"-common.path-prefix={data_dir}",
    ]
    url = f"http://127.0.0.1:{http_port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    try:
        _wait_ready(url, process, log, timeout_s)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while process.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{url}/ready").text.strip() == "ready":
                    return
            time.sleep(0.25)  # Loki takes 15-30 s to get ready: nothing to wait on but time
    tail = log.read_text(errors="replace")[-2000:]
    if process.poll() is not None:
        state = f"exited with {process.returncode}"
    else:
        state = f"was not ready within {timeout_s} s"
    raise RuntimeError(f"Loki at {url} {state}; its log ends:\n{tail}")

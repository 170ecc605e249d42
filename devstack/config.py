"""The stack's layout: where everything lives under ``DEVSTACK_DIR``, its ports and tokens.

One JSON file, ``DEVSTACK_DIR/stack.json``, describes a running stack; ``devstack up`` writes
it, every role process reads it at start (``python -m devstack run ROLE --dir DIR``), and
``down``/``status``/``scenario`` find the stack through it. Paths::

    DEVSTACK_DIR/
      stack.json            this file
      ca/                   the local CA and the ingress's certificates (ca.py)
      ingress/              nginx's prefix: nginx.conf, logs/access.log, logs/error.log
      pg/                   the PostgreSQL cluster: data/, log/postgresql.json
      spool/                the services' agent_logging spools (one directory each)
      nodes/N/state/        a node's local state: instance-id, bin/, etc/, spool/ (wiped on
                            reimage)
      ledger/               every record each process logged, as JSON lines (the witness
                            that records_logged is counted from; it survives reimages)
      k8s/                  the projector's custom resources and their watch stream
      faults/               fault flags the processes look at
      run/                  pid and ready files, role output
      scenarios/            one directory per scenario run: evidence and its DuckDB

All processes bind 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

__all__ = [
    "DEFAULT_DIR",
    "DEVSTACK_DIR_ENV",
    "ENV",
    "INGRESS_HOST",
    "LOKI_TENANT_ENV",
    "LOKI_URL_ENV",
    "StackConfig",
    "configure_logging",
    "load",
]

DEVSTACK_DIR_ENV: Final = "DEVSTACK_DIR"
"""Where the stack keeps its state; default ``/tmp/devstack-<uid>``."""

LOKI_URL_ENV: Final = "LOKI_URL"
"""A real Loki to ship to instead of the Loki test server ``devstack up`` starts."""

LOKI_TENANT_ENV: Final = "LOKI_TENANT"
"""The tenant (``X-Scope-OrgID``) to use with ``$LOKI_URL``, for a multi-tenant Loki."""

DEFAULT_DIR: Final = Path("/tmp") / f"devstack-{os.getuid()}"  # noqa: S108 - a per-user dir

#: The ``env`` label of every record the stack logs (the Loki selector of a scenario).
ENV: Final = "devstack"

#: Host names the ingress certificate is issued for (and the nginx ``server_name``).
INGRESS_HOST: Final = "api.devstack.local"


@dataclass
class StackConfig:
    """A stack's ports, paths, tokens and pids (``stack.json``).

    Attributes:
        dir: DEVSTACK_DIR.
        loki_url: where every process ships (the Loki test server, or ``$LOKI_URL``).
        loki_tenant: ``$LOKI_TENANT`` with ``$LOKI_URL``: every push, drain and query
            sends it as ``X-Scope-OrgID``.
        api_port, ingress_port, provider_port, pg_port: 127.0.0.1 ports.
        pg_bin: the PostgreSQL server binaries' directory.
        tenant_token, node_token: the bearer tokens the API accepts now.
        node_ids: the nodes the stack runs an agent for.
        pids: role name (``api``, ``node:n-1``, ...) to process id.
    """

    dir: Path
    loki_url: str
    api_port: int
    ingress_port: int
    provider_port: int
    pg_port: int
    pg_bin: str
    tenant_token: str
    node_token: str
    node_ids: list[str] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)
    loki_managed: bool = True
    loki_tenant: str | None = None

    # -- paths -----------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.dir / "stack.json"

    @property
    def ca_dir(self) -> Path:
        return self.dir / "ca"

    @property
    def ingress_dir(self) -> Path:
        return self.dir / "ingress"

    @property
    def pg_dir(self) -> Path:
        return self.dir / "pg"

    @property
    def pg_log(self) -> Path:
        return self.pg_dir / "log" / "postgresql.json"

    @property
    def access_log(self) -> Path:
        return self.ingress_dir / "logs" / "access.log"

    @property
    def error_log(self) -> Path:
        return self.ingress_dir / "logs" / "error.log"

    @property
    def spool_dir(self) -> Path:
        return self.dir / "spool"

    @property
    def ledger_dir(self) -> Path:
        return self.dir / "ledger"

    @property
    def k8s_dir(self) -> Path:
        return self.dir / "k8s"

    @property
    def watch_log(self) -> Path:
        return self.k8s_dir / "watch.ndjson"

    @property
    def faults_dir(self) -> Path:
        return self.dir / "faults"

    @property
    def run_dir(self) -> Path:
        return self.dir / "run"

    @property
    def tokens_file(self) -> Path:
        return self.dir / "secrets" / "api-tokens"

    @property
    def scenarios_dir(self) -> Path:
        return self.dir / "scenarios"

    def node_dir(self, node_id: str) -> Path:
        """A node's directory; its ``state/`` is what a reimage wipes."""
        return self.dir / "nodes" / node_id

    def node_state(self, node_id: str) -> Path:
        return self.node_dir(node_id) / "state"

    def node_spool(self, node_id: str) -> Path:
        return self.node_state(node_id) / "spool"

    # -- addresses ---------------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname=provisioning"

    @property
    def ingress_url(self) -> str:
        return f"https://127.0.0.1:{self.ingress_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def provider_url(self) -> str:
        return f"http://127.0.0.1:{self.provider_port}"

    def fault(self, name: str) -> bool:
        """Whether the fault flag ``name`` is set (a file under ``faults/``)."""
        return (self.faults_dir / name).exists()

    # -- persistence -------------------------------------------------------------------------

    def save(self) -> None:
        """Write ``stack.json`` atomically (readers never see half a file)."""
        data = asdict(self)
        data["dir"] = str(self.dir)
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        temporary.replace(self.state_file)


def load(directory: Path) -> StackConfig:
    """The stack described by ``directory/stack.json``.

    Raises:
        FileNotFoundError: no stack there (``devstack up`` has not run).
    """
    data: dict[str, Any] = orjson.loads((directory / "stack.json").read_bytes())
    data["dir"] = Path(data["dir"])
    return StackConfig(**data)


def configure_logging(
    config: StackConfig,
    *,
    service: str,
    layer: str,
    ids: dict[str, str] | None = None,
    ready: str,
    spool_dir: Path | None = None,
    ledger_name: str | None = None,
) -> None:
    """Configure ``agent_logging`` as every devstack process does: the durable path to Loki,
    and the ledger file that ``records_logged`` is counted from.

    Args:
        config: the stack.
        service: the service name (Loki's ``service_name`` label).
        layer: ``node``, ``ingress``, ``api``, ``workflow`` or ``db``.
        ids: process-wide identifiers (a node agent's ``node_id`` and ``node_instance_id``).
        spool_dir: the spool root (default: the services' shared ``spool/``).
        ready: the role's name: ``run/READY.ready`` is created once logging is configured,
            which is what ``devstack up`` waits for.
        spool_dir: the spool root (default: the services' shared ``spool/``).
        ledger_name: the ledger file's name (default: the service's).
    """
    import agent_logging

    agent_logging.configure(
        service=service,
        layer=layer,
        env=ENV,
        output="none",
        ids=ids or {},
        loki_url=config.loki_url,
        loki_tenant=config.loki_tenant,
        spool_dir=spool_dir or config.spool_dir,
        # Shipping every 200 ms keeps a scenario's drain short; Loki batches are still small.
        batch_interval_s=0.2,
        file_path=config.ledger_dir / f"{ledger_name or service}.jsonl",
        propagate_hosts=["127.0.0.1"],
    )
    # httpx logs every request at INFO; the services' own records say what matters.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    (config.run_dir / f"{ready}.ready").touch()

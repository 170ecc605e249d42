"""The stack's processes: bring them up, check on them, reimage a node, take them down.

``Stack.up(directory)`` starts, in order: the Loki test server (unless ``$LOKI_URL`` names a
real Loki), PostgreSQL, the API, the provider simulator, the workflow worker, the status
projector, nginx in front of the API, and one agent per node. Every Python role runs as
``python -m devstack run ROLE --dir DIR`` in a session of its own, from the repository root
(``tests.lokisim`` is importable from there), with its output in ``run/ROLE.out``.
``Stack.down()`` stops what it started, by the process ids it recorded (process group:
the role and anything it ran), and deletes the directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import httpx

from devstack.config import INGRESS_HOST, LOKI_TENANT_ENV, LOKI_URL_ENV, StackConfig, load
from devstack.database import Cluster, connect, find_binaries
from devstack.ingress import Ingress, find_nginx
from devstack.node_agent import install_image

__all__ = ["NODE_IDS", "REPO_ROOT", "Stack", "StackError", "free_port", "missing_binaries"]

#: The repository root: role processes run from here.
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
NODE_IDS: Final = ("n-1", "n-2", "n-3")
_READY_TIMEOUT_S: Final = 30.0
_STOP_TIMEOUT_S: Final = 10.0


class StackError(RuntimeError):
    """The stack could not be brought up, or a process of it misbehaved."""


def missing_binaries() -> list[str]:
    """What the stack needs and the machine lacks (Debian packages ``nginx``, ``postgresql``)."""
    missing = []
    if find_nginx() is None:
        missing.append("nginx")
    if find_binaries() is None:
        missing.append("postgresql")
    return missing


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes (it is our child, not yet reaped).
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return status != "Z"
    return True


def _wait_dead(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


class Stack:
    """A running stack (its config holds the ports, tokens and pids)."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        # The processes this object started, by pid: waited for when they stop (a stack
        # attached to from another command only has pids, and polls them instead).
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    @classmethod
    def attach(cls, directory: Path) -> Stack:
        """The stack already running in ``directory``.

        Raises:
            FileNotFoundError: there is none (no ``stack.json``).
        """
        return cls(load(directory))

    # -- up ----------------------------------------------------------------------------------

    @classmethod
    def up(cls, directory: Path) -> Stack:
        """Start a stack in ``directory`` (which must not hold one already).

        Args:
            directory: DEVSTACK_DIR (created; it must be reachable by other users, since
                PostgreSQL and nginx's workers run as ``postgres`` and ``nobody`` under root).

        Returns:
            The running stack.

        Raises:
            StackError: a binary is missing or a process did not come up; whatever did
                start is stopped again.
        """
        missing = missing_binaries()
        if missing:
            raise StackError(f"missing Debian packages: {', '.join(missing)}")
        if (directory / "stack.json").exists():
            raise StackError(f"a stack already runs in {directory} (devstack down first)")
        if os.geteuid() == 0:
            # PostgreSQL runs as postgres and nginx's workers as nobody: they must reach
            # their directories under it.
            closed = [
                p
                for p in directory.resolve().parents
                if p.exists() and not p.stat().st_mode & 0o001
            ]
            if closed:
                raise StackError(
                    f"{closed[0]} is not traversable by other users (mode "
                    f"{closed[0].stat().st_mode & 0o777:o}): put DEVSTACK_DIR elsewhere"
                )
        directory.mkdir(parents=True, exist_ok=True)
        # Traversable by nginx's workers and the postgres user; the secrets stay private.
        directory.chmod(0o711)
        real_loki = os.environ.get(LOKI_URL_ENV)
        config = StackConfig(
            dir=directory,
            loki_url=real_loki.rstrip("/") if real_loki else f"http://127.0.0.1:{free_port()}",
            api_port=free_port(),
            ingress_port=free_port(),
            provider_port=free_port(),
            pg_port=free_port(),
            pg_bin=str(find_binaries()),
            tenant_token=secrets.token_urlsafe(24),
            node_token=secrets.token_urlsafe(24),
            node_ids=list(NODE_IDS),
            loki_managed=not real_loki,
            loki_tenant=(os.environ.get(LOKI_TENANT_ENV) or None) if real_loki else None,
        )
        for path in (
            config.run_dir,
            config.ledger_dir,
            config.spool_dir,
            config.faults_dir,
            config.k8s_dir,
            config.scenarios_dir,
            config.tokens_file.parent,
        ):
            path.mkdir(parents=True, exist_ok=True)
        config.tokens_file.parent.chmod(0o700)
        config.save()
        stack = cls(config)
        try:
            stack._start_all()
        except BaseException:
            stack.down(remove=False)
            raise
        return stack

    def write_tokens(self) -> None:
        """The API's accepted tokens, from the config (rotating one is changing it here)."""
        self.config.tokens_file.write_text(
            f"tenant {self.config.tenant_token}\nnode {self.config.node_token}\n", "utf-8"
        )

    def _start_all(self) -> None:
        # Imported here: only bringing a stack up needs the cryptography package.
        from devstack.ca import LocalCA

        config = self.config
        self.write_tokens()
        ca = LocalCA.create(config.ca_dir)
        certificate = ca.issue(
            INGRESS_HOST,
            hosts=[INGRESS_HOST, "127.0.0.1"],
            key_path=config.ca_dir / "server.key",
            cert_path=config.ca_dir / "server-valid.pem",
        )
        ca.issue(
            INGRESS_HOST,
            hosts=[INGRESS_HOST, "127.0.0.1"],
            key_path=config.ca_dir / "server.key",
            cert_path=config.ca_dir / "server-expired.pem",
            expired=True,
        )
        if config.loki_managed:
            port = config.loki_url.rsplit(":", 1)[1]
            self._spawn(
                "loki",
                ["-m", "tests.lokisim", "--host", "127.0.0.1", "--port", port],
            )
            self._wait_http(f"{config.loki_url}/ready", "loki")
        cluster = Cluster(config.pg_dir, Path(config.pg_bin), config.pg_port)
        cluster.start()
        with connect(config.dsn, "devstack-setup") as conn:
            conn.execute("SET log_statement = 'none'")
            for node in config.node_ids:
                conn.execute("INSERT INTO nodes (node_id) VALUES (%s)", (node,))
        self._spawn_role("api")
        self._spawn_role("provider")
        self._wait_http(f"{config.api_url}/healthz", "api")
        self._wait_http(f"{config.provider_url}/healthz", "provider")
        self._spawn_role("worker")
        self._spawn_role("projector")
        served = config.ingress_dir / "server.pem"
        served.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(certificate.cert_path, served)
        nginx = find_nginx()
        if nginx is None:  # checked in up(); kept for the type checker
            raise StackError("nginx is missing")
        ingress = self.ingress()
        master = ingress.start(nginx, config.run_dir / "ingress.out")
        self._children[master.pid] = master
        config.pids["ingress"] = master.pid
        config.save()
        self._wait_http(f"{config.ingress_url}/healthz", "ingress", verify=True)
        for node in config.node_ids:
            self.start_node(node, fresh=True)
        for role in ("worker", "projector", *(f"node-agent-{n}" for n in config.node_ids)):
            self._wait_ready(role)

    def ingress(self) -> Ingress:
        """The ingress's configuration handle (reload it to apply a change)."""
        config = self.config
        return Ingress(
            config.ingress_dir,
            port=config.ingress_port,
            upstream_port=config.api_port,
            server_name=INGRESS_HOST,
            cert_path=config.ingress_dir / "server.pem",
            key_path=config.ca_dir / "server.key",
        )

    def _spawn(self, name: str, arguments: list[str]) -> int:
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [environment.get("PYTHONPATH")])]
        )
        # Role processes configure agent_logging themselves: the caller's variables
        # (identifiers, spool options) must not leak into them.
        for name_ in [n for n in environment if n.startswith("AGENT_LOGGING_")]:
            del environment[name_]
        (self.config.run_dir / f"{name}.ready").unlink(missing_ok=True)
        with (self.config.run_dir / f"{name}.out").open("ab") as output:
            process = subprocess.Popen(  # noqa: S603 - our interpreter, our module
                [sys.executable, *arguments],
                cwd=REPO_ROOT,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._children[process.pid] = process
        self.config.pids[name] = process.pid
        self.config.save()
        return process.pid

    def _spawn_role(self, role: str, *extra: str) -> int:
        name = f"node-agent-{extra[0]}" if role == "node" else role
        return self._spawn(
            name, ["-m", "devstack", "run", role, *extra, "--dir", str(self.config.dir)]
        )

    def start_node(self, node_id: str, *, fresh: bool) -> int:
        """Start a node's agent; ``fresh`` lays a new image into its (empty) state first."""
        state = self.config.node_state(node_id)
        if fresh:
            install_image(state, self.config.node_token)
        return self._spawn_role("node", node_id)

    def _wait_http(self, url: str, what: str, *, verify: bool = False) -> None:
        context: ssl.SSLContext | bool = False
        if verify:
            context = ssl.create_default_context(cafile=str(self.config.ca_dir / "ca.pem"))
        deadline = time.monotonic() + _READY_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            self._check_alive(what)
            try:
                if httpx.get(url, verify=context, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise StackError(f"{what} did not answer {url} in time: {last}")

    def _wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if (self.config.run_dir / f"{name}.ready").exists():
                return
            self._check_alive(name)
            time.sleep(0.05)
        raise StackError(f"{name} did not get ready in time; see run/{name}.out")

    def _check_alive(self, name: str) -> None:
        pid = self.config.pids.get(name)
        if pid is not None and not _alive(pid):
            output = self.config.run_dir / f"{name}.out"
            tail = output.read_text(errors="replace")[-1500:] if output.exists() else ""
            raise StackError(f"{name} (pid {pid}) exited:\n{tail}")

    # -- operations --------------------------------------------------------------------------

    def stop_process(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Signal a recorded process's group and wait for it (SIGKILL after 10 s)."""
        self.stop_processes([name], sig)

    def stop_processes(self, names: list[str], sig: signal.Signals = signal.SIGTERM) -> None:
        """Signal recorded processes' groups at once, then wait for all of them; what is
        still alive after 10 s gets SIGKILL."""
        pids = [pid for name in names if (pid := self.config.pids.pop(name, None)) is not None]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        for pid in pids:
            if not self._wait_dead(pid, max(0.0, deadline - time.monotonic())):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                self._wait_dead(pid, _STOP_TIMEOUT_S)
        self.config.save()

    def _wait_dead(self, pid: int, timeout_s: float) -> bool:
        child = self._children.get(pid)
        if child is None:
            return _wait_dead(pid, timeout_s)
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        del self._children[pid]
        return True

    def drain(self, spool_dir: Path, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """``agent-logging drain`` for one spool directory (the gate before a reimage)."""
        return subprocess.run(  # noqa: S603 - our interpreter, the library's own CLI
            [
                sys.executable,
                *("-m", "agent_logging._cli", "drain"),
                *("--spool-dir", str(spool_dir), "--loki-url", self.config.loki_url),
                *("--timeout-s", str(timeout_s)),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s + 30,
            check=False,
        )

    def reimage(self, node_id: str) -> None:
        """Reimage a node: power it off (SIGKILL, mid-task or not), drain its spool into Loki
        (refusing to go on if that fails), wipe its local state, boot a fresh image.

        Raises:
            StackError: the drain did not confirm every record in Loki.
        """
        name = f"node-agent-{node_id}"
        self.stop_process(name, signal.SIGKILL)
        drained = self.drain(self.config.node_spool(node_id))
        if drained.returncode != 0:
            raise StackError(
                f"drain of {node_id} failed ({drained.returncode}): {drained.stderr.strip()}"
            )
        shutil.rmtree(self.config.node_state(node_id))
        self.start_node(node_id, fresh=True)
        self._wait_ready(name)

    def status(self) -> dict[str, bool]:
        """Each recorded process: alive or not."""
        return {name: _alive(pid) for name, pid in sorted(self.config.pids.items())}

    # -- down --------------------------------------------------------------------------------

    def down(self, *, remove: bool = True) -> None:
        """Stop every process this stack started and (``remove``) delete its directory."""
        # Everything at once: node agents and the API sit in 5 s long polls, and one by one
        # their graceful stops would add up.
        self.stop_processes([n for n in self.config.pids if n != "loki"])
        Cluster(self.config.pg_dir, Path(self.config.pg_bin), self.config.pg_port).stop()
        self.stop_process("loki")
        if remove:
            shutil.rmtree(self.config.dir, ignore_errors=True)

"""``shipper="process"``: ship the spool from a helper process instead of a thread.

The owner's half of the second runner (the first is the thread, ``_shipper``): it starts the
child (``_child``), which runs the same shipper and delivery design (``_delivery``), and
serves its requests about the spool here.

Why. The thread shipper's CPU time (reading frames, encoding the push, compressing it, the
HTTP exchange) is spent under the service's GIL, and the two threads hand the GIL back and
forth on every batch. A service that logs flat out on a machine with a spare core gets more
through when shipping runs in a process of its own: 1.5-1.75x the lines per second into the
test server (``python -m benchmarks.ship``, ``benchmarks/RESULTS.md``), the logging thread
then only rendering and appending. The cost is a second Python process (about 52 MiB
resident in that benchmark) per service process that configures it, and the start of an
interpreter at ``configure()`` (which does not wait for it).

Latency. The serving thread here needs the GIL for each request, which a thread logging flat
out holds for a switch interval (5 ms) at a time. So the child plans and reads its next batch
while it pushes one (``_child.RemoteSpool``), which hides that wait, and the fsync of the
``batch`` policy runs on a thread of its own, beside the child's read rather than before it.
Logging threads do not let the serving thread in (as they let a thread shipper in when it has
fallen behind, ``_durable``): measured, that cost more than it saved, each ``sleep(0)``
giving the core away to the child or the server; 500,000 records into the test server went
at 58,000-60,000 lines/s with it and 63,000-70,000 without.

How. :class:`ProcessShipper` starts ``python -m agent_logging.shipping._child`` with pipes for its
stdin and stdout and serves it from a thread here; the spool stays this process's, and so does
every decision about it. The child runs the ordinary shipper over a stand-in spool that asks
this process where to read, reads the segment files itself (they are in the page cache: the
writer's mapping is the file), and reports what it shipped (``spool._remote``). One JSON object
per line:

- child → owner, requests (answered with ``{"re": id, ...}``, or ``{"re": id, "error": ...}``):
  ``plan`` (answer: ``plan``, a :class:`~agent_logging.spool._batches.ReadPlan` or null, and
  ``pending``, the spool's unacknowledged bytes), ``read_failed`` (``start``, ``sealed``,
  ``reason``) and ``records`` (answer: ``records``, how many are unacknowledged);
- child → owner, notes: ``report`` (``start``, ``end``, ``count``, ``payload``, ``torn``,
  ``corrupt``: records acknowledged, or a damaged range skipped), ``error`` (``message``, for
  the service's own log) and ``stats``; every message carries the child's shipper counters;
- owner → child: the configuration (first line), ``wake`` (``pending``: a full batch is
  waiting), ``flush`` (ship everything now) and ``stop``.

Failure. The child ends when its stdin ends, so it never outlives the service, however the
service dies; what it had not reported stays spooled, and the next shipper reconciles it with
Loki before pushing any of it again: the child writes ``in-flight`` itself before each push
(``_reconcile``), and once its owner is gone it starts no other batch.
When the child dies, it is started again after a backoff (1 s, doubling to 30 s), and the
death is reported. A flush or shutdown while no child runs ships from this process, through
the thread shipper it keeps for that. If no child can be started at all (no usable
``sys.executable``), or three die within 2 s of their start, shipping falls back to that
thread shipper for good, and says so.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

import orjson

from agent_logging._settings import Settings
from agent_logging.errors import SpoolError
from agent_logging.shipping import _child
from agent_logging.shipping._counters import ShipCounters
from agent_logging.shipping._delivery import ShipperStats
from agent_logging.shipping._shipper import FLUSH_POLL_S, STOP_GRACE_S, Shipper, flush_share
from agent_logging.spool._remote import answer
from agent_logging.spool._spool import Spool

__all__ = ["ProcessShipper"]

_RESTART_INITIAL_S: Final = 1.0
_RESTART_MAX_S: Final = 30.0
# A child that dies this soon after its start, this many times in a row, will not do better:
# ship from a thread instead (an interpreter that cannot import the package, say).
_EARLY_DEATH_S: Final = 2.0
_EARLY_DEATHS: Final = 3
# Children of a parent that forked: their pipe objects, never to be closed or collected here
# (see ProcessShipper.after_fork_in_child).
_ABANDONED: Final[list[subprocess.Popen[bytes]]] = []
# The directory that holds the agent_logging package: the child must import the same one.
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])


class ProcessShipper:
    """Ship ``spool`` from a child process; the interface ``Durable`` uses of a ``Shipper``.

    Logging threads never let its serving thread in at the GIL (:attr:`busy` is always
    False, see ``_durable`` and the module docstring).

    Args:
        spool: this process's spool.
        config: the child's configuration (see ``_child._shipper``): the Loki client's
            and the shipper's options.
        fallback: a thread shipper over the same spool, never started unless no child can be;
            it ships a flush that finds no child running.
        on_error: called with a message when the child dies, cannot start, or reports a
            shipping failure; exceptions it raises are swallowed.
        batch_interval_s: how often the spool's ``interval`` fsync policy is looked at.
    """

    busy: Final = False

    def __init__(
        self,
        spool: Spool,
        config: dict[str, Any],
        *,
        fallback: Shipper,
        on_error: Callable[[str], None],
        batch_interval_s: float,
    ) -> None:
        self._spool = spool
        self._config = config
        self._fallback = fallback
        self._on_error = on_error
        self._interval_s = batch_interval_s
        self._sync_batches = spool.fsync_policy == "batch"
        self.dead_letter_path = fallback.dead_letter_path
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe_fds: tuple[int, ...] = ()
        self._threads: list[threading.Thread] = []
        self._gave_up = False
        self._new_state()

    @classmethod
    def for_settings(
        cls, settings: Settings, spool: Spool, fallback: Shipper, on_error: Callable[[str], None]
    ) -> ProcessShipper:
        """A process shipper for ``spool``, configured from ``settings`` as ``fallback``
        (the thread shipper ``Durable`` would use) is."""
        return cls(
            spool,
            _child.config_for(settings, spool.wake_bytes, fallback.dead_letter_path),
            fallback=fallback,
            on_error=on_error,
            batch_interval_s=settings.batch_interval_s,
        )

    def _new_state(self) -> None:
        self._send_lock = threading.Lock()
        self._progress = threading.Condition()
        self._ship_lock = threading.Lock()  # a child, or the fallback, reads at a time
        self._stopping = threading.Event()
        self._sync_wanted = threading.Event()
        self._acked = 0
        self._counters = ShipCounters()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the child and the threads that serve it (no-op when running)."""
        if self._threads or self._gave_up:
            return
        self._stopping.clear()
        self._process = self._spawn()
        if self._process is None:
            self._give_up()
            return
        for name, target in (
            ("agent-logging-ship-serve", self._serve),
            ("agent-logging-ship-wake", self._wake_loop),
            ("agent-logging-ship-sync", self._sync_loop),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    @property
    def running(self) -> bool:
        """Whether a child is shipping (or, after a failed start, the fallback thread)."""
        if self._gave_up:
            return self._fallback.running
        process = self._process
        return process is not None and process.poll() is None

    def flush(self, timeout_s: float) -> bool:
        """Ship what the spool holds now, waiting at most ``timeout_s``.

        Returns:
            True when everything present at the call left the spool in time.
        """
        if self._gave_up:
            return self._fallback.flush(timeout_s)
        if not self.running:
            return self._ship_here(timeout_s)
        deadline = time.monotonic() + timeout_s
        with self._progress:
            target = self._acked + self._spool.stats().records
        self._send({"op": "flush"})
        while True:
            with self._progress:
                if self._acked >= target or self._spool.pending_bytes() == 0:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if not self.running:
                    break
                self._progress.wait(min(remaining, FLUSH_POLL_S))
        return self._ship_here(deadline - time.monotonic())

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Flush within ``timeout_s``, then end the child and the threads.

        Returns:
            True when the spool was flushed and the child ended in time.
        """
        deadline = time.monotonic() + timeout_s
        flushed = self.flush(flush_share(timeout_s))
        self._stopping.set()
        self._spool.wake.set()  # ends the wake loop's wait
        self._sync_wanted.set()  # and the sync loop's
        ended = True
        if self._gave_up:
            ended = self._fallback.halt(max(STOP_GRACE_S, deadline - time.monotonic()))
        process = self._process
        if process is not None:
            self._send({"op": "stop"})
            try:
                process.wait(max(STOP_GRACE_S, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                ended = False
        for thread in self._threads:
            thread.join(max(0.0, min(STOP_GRACE_S, deadline - time.monotonic())))
        self._threads = []
        return flushed and ended

    def after_fork_in_child(self) -> None:
        """In a forked child: let go of the parent's child and pipes, without touching them."""
        process, self._process = self._process, None
        if process is not None:
            # Not through the file objects: a thread of the parent may have held their
            # locks (or the send lock) at the fork, and here nobody will release them. The
            # descriptors are closed, and the objects kept for good, so that no close()
            # from their finalizers ever waits for those locks or hits a reused descriptor.
            for fd in self._pipe_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            _ABANDONED.append(process)
        self._threads = []
        self._gave_up = False
        self._new_state()
        self._fallback.after_fork_in_child()

    def stats(self) -> ShipperStats:
        """The counters of every child so far and of the fallback (``_counters``)."""
        return self._counters.merged(self._fallback.stats())

    # -- the child -------------------------------------------------------------------------

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        environ = dict(os.environ)
        environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, environ.get("PYTHONPATH")) if p
        )
        try:
            process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
                _child.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=environ,
                close_fds=True,
            )
            assert process.stdin is not None  # noqa: S101 - PIPE was asked for
            assert process.stdout is not None  # noqa: S101 - PIPE was asked for
            self._pipe_fds = (process.stdin.fileno(), process.stdout.fileno())
            process.stdin.write(orjson.dumps(self._config) + b"\n")
            process.stdin.flush()
        except (OSError, ValueError) as exc:
            self._report(f"cannot start the shipper process ({sys.executable}): {exc}")
            return None
        return process

    def _serve(self) -> None:
        delay = _RESTART_INITIAL_S
        early_deaths = 0
        process = self._process
        while process is not None:
            began = time.monotonic()
            self._serve_one(process)
            code = process.wait()
            self._close_pipes(process)
            self._child_ended()
            if self._stopping.is_set():
                return
            lived_s = time.monotonic() - began
            early_deaths = early_deaths + 1 if lived_s < _EARLY_DEATH_S else 0
            if early_deaths >= _EARLY_DEATHS:
                self._report(
                    f"the shipper process exited (status {code}) within {_EARLY_DEATH_S:g} s "
                    f"of its start, {early_deaths} times in a row"
                )
                self._give_up()
                return
            if lived_s > 2 * _RESTART_MAX_S:
                delay = _RESTART_INITIAL_S  # it had been running well: start afresh
            self._report(
                f"the shipper process exited (status {code}); starting another in {delay:g} s"
            )
            if self._stopping.wait(delay):
                return
            delay = min(_RESTART_MAX_S, delay * 2)
            with self._ship_lock:  # not while a flush ships from here
                process = self._process = self._spawn()
        self._give_up()

    def _child_ended(self) -> None:
        """Keep the ended child's counts; wake flush waiters (they ship from here now)."""
        self._counters.child_ended()
        with self._progress:
            self._progress.notify_all()

    def _close_pipes(self, process: subprocess.Popen[bytes]) -> None:
        """Close this process's ends of the pipes to an ended child."""
        with self._send_lock:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError, ValueError):
                        pipe.close()

    def _give_up(self) -> None:
        self._gave_up = True
        self._report("shipping from a thread of this process instead")
        self._fallback.start()

    def _serve_one(self, process: subprocess.Popen[bytes]) -> None:
        """Answer the child's requests until its stdout ends."""
        stdout = process.stdout
        assert stdout is not None  # noqa: S101 - PIPE was asked for
        for line in stdout:
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self._report(f"the shipper process said something unreadable: {line[:200]!r}")
                continue
            stats = message.get("stats")
            if stats is not None:
                self._counters.update(stats)
            answer = self._handle(message)
            if answer is not None:
                answer["re"] = message["id"]
                self._send(answer, process)

    def _handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to a request, or None for a note; a failure becomes an error answer."""
        op = message.get("op")
        if op == "error":
            self._report(str(message.get("message")), keep=False)
            return None
        try:
            reply, acked = answer(self._spool, message)
        except Exception as exc:  # noqa: BLE001 - the serving thread must outlive any failure
            reason = str(exc) if isinstance(exc, SpoolError) else f"{type(exc).__name__}: {exc}"
            if "id" not in message:
                self._report(f"the shipper process's {op!r} failed: {reason}")
                return None
            return {"error": reason}
        if op == "plan" and self._sync_batches:
            self._sync_wanted.set()  # fsync beside the child's read, not before it
        if acked:
            with self._progress:
                self._acked += acked
                self._progress.notify_all()
        return reply

    def _send(
        self, message: dict[str, Any], process: subprocess.Popen[bytes] | None = None
    ) -> None:
        process = process or self._process
        stdin: IO[bytes] | None = None if process is None else process.stdin
        if stdin is None:
            return
        line = orjson.dumps(message) + b"\n"
        with self._send_lock, contextlib.suppress(OSError, ValueError):  # the child is gone
            stdin.write(line)
            stdin.flush()

    def _wake_loop(self) -> None:
        """Pass the spool's size wakes on to the child, until stopped or given up."""
        wake = self._spool.wake
        while not self._stopping.is_set() and not self._gave_up:
            if wake.wait(self._interval_s):
                if self._gave_up:
                    return  # the wake is the fallback thread's now: leave it set
                wake.clear()
                if self._stopping.is_set():
                    return
                self._send({"op": "wake", "pending": self._spool.pending_bytes()})

    def _sync_loop(self) -> None:
        """The fsync policies: ``batch`` once per plan, ``interval`` on its schedule."""
        while not self._stopping.is_set():
            wanted = self._sync_wanted.wait(self._interval_s)
            self._sync_wanted.clear()
            try:
                if wanted:
                    self._spool.sync()
                else:
                    self._spool.sync_if_due()
            except SpoolError:
                return  # closed: shutting down
            except Exception as exc:  # noqa: BLE001 - shipping goes on; the failure is reported
                self._report(f"spool sync failed: {type(exc).__name__}: {exc}")

    def _ship_here(self, timeout_s: float) -> bool:
        """Ship from this process while no child runs (at most ``timeout_s``)."""
        if timeout_s <= 0:
            return self._spool.pending_bytes() == 0
        if not self._ship_lock.acquire(timeout=timeout_s):
            return False
        try:
            return self._fallback.ship_pending(timeout_s)
        finally:
            self._ship_lock.release()

    def _report(self, message: str, *, keep: bool = True) -> None:
        """Tell the service's log; with ``keep``, make it the last error ``health()`` shows
        (a failure the child reports is in its own counters already)."""
        if keep:
            self._counters.note_error(message)
        with contextlib.suppress(Exception):
            self._on_error(message)

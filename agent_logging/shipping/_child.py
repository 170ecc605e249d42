"""The shipper process, the second runner: a :class:`~agent_logging.shipping._shipper.Shipper`
over another process's spool.

Started by ``_process.ProcessShipper`` as ``python -m agent_logging.shipping._child``, with
pipes for stdin and stdout; the protocol is in ``_process``'s docstring. The shipper here
is the thread shipper, unchanged, and so is the delivery design it runs (``_delivery``:
batching, backoff, bisection, dead letters, reconcile). Only its spool is a stand-in,
:class:`RemoteSpool`, which asks the owner where to read, reads the segment files itself and
reports what it shipped.

The process ends when its stdin ends (the owner exited, however it died) or on ``stop``. It
ignores SIGINT: a Ctrl-C in a terminal reaches the whole process group, and the owner's
shutdown should still find a shipper to flush through.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple

import orjson

from agent_logging.errors import SpoolError
from agent_logging.loki._client import LokiClient
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._batches import read_segment
from agent_logging.spool._framing import HEADER_BYTES
from agent_logging.spool._segments import SpooledRecord, SpoolPosition

if TYPE_CHECKING:
    from agent_logging._settings import Settings

__all__ = ["RemoteBatch", "RemoteSpool", "command", "config_for", "default_labels", "main"]

#: How long a request waits for the owner's answer before it fails (the shipper backs off).
REQUEST_TIMEOUT_S: Final = 30.0
#: How long ``stop`` gives the shipping thread to end (a push in flight is abandoned).
_HALT_S: Final = 0.25


@dataclass(frozen=True, slots=True)
class RemoteBatch:
    """A batch read by :class:`RemoteSpool`, with the damage its read found."""

    records: tuple[SpooledRecord, ...]
    end: SpoolPosition
    start: SpoolPosition
    payload_bytes: int
    torn: int
    corrupt: int


class _Records(NamedTuple):
    records: int


class Channel:
    """Lines of JSON to and from the owner: requests with answers, and one-way notes.

    One reader (:meth:`serve`, the main thread) routes each answer to its request by ``id``
    and hands every other message to ``on_note``; any thread may send.
    """

    def __init__(self, incoming: IO[bytes], outgoing: IO[bytes]) -> None:
        self._in = incoming
        self._out = outgoing
        self._send_lock = threading.Lock()
        self._answers: dict[int, list[dict[str, Any]]] = {}
        self._answered = threading.Condition()
        self._next_id = 0
        self._closed = False
        #: Extra fields for every message sent (the shipper's stats).
        self.stamp: Callable[[], dict[str, Any]] = dict

    @property
    def closed(self) -> bool:
        """Whether the owner's side has ended (its stdin closed)."""
        return self._closed

    def send(self, op: str, **fields: Any) -> None:
        """Send a one-way message."""
        message = {"op": op, **fields, **self.stamp()}
        line = orjson.dumps(message) + b"\n"
        with self._send_lock:
            self._out.write(line)
            self._out.flush()

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its answer.

        Raises:
            SpoolError: the owner answered with an error, is gone, or did not answer in time.
        """
        with self._answered:
            if self._closed:
                raise SpoolError("the spool's owner is gone")
            self._next_id += 1
            number = self._next_id
            slot: list[dict[str, Any]] = []
            self._answers[number] = slot
        try:
            self.send(op, id=number, **fields)
        except OSError as exc:
            raise SpoolError(f"the spool's owner is gone: {exc}") from exc
        with self._answered:
            if not self._answered.wait_for(lambda: slot or self._closed, REQUEST_TIMEOUT_S):
                self._answers.pop(number, None)
                raise SpoolError(f"the spool's owner did not answer {op!r} in time")
            self._answers.pop(number, None)
            if not slot:
                raise SpoolError("the spool's owner is gone")
        answer = slot[0]
        if answer.get("error") is not None:
            raise SpoolError(str(answer["error"]))
        return answer

    def serve(self, on_note: Callable[[dict[str, Any]], bool]) -> None:
        """Read messages until the input ends or ``on_note`` returns False."""
        try:
            for line in self._in:
                message = orjson.loads(line)
                number = message.get("re")
                if number is None:
                    if not on_note(message):
                        return
                    continue
                with self._answered:
                    slot = self._answers.get(number)
                    if slot is not None:
                        slot.append(message)
                        self._answered.notify_all()
        finally:
            with self._answered:
                self._closed = True
                self._answered.notify_all()


class RemoteSpool:
    """The owner's spool as the shipper sees it (``SpoolLike``), over a :class:`Channel`.

    Read-ahead. While the shipper pushes a batch (waiting on the network, and on the server),
    the next batch is planned and read on a thread of its own, from where the batch in flight
    ends: the owner's answer and the read are off the shipper's path. It is used only if the
    batch before it was acknowledged and ended there; otherwise (a failed push, a part
    acknowledged) the next peek reads from the head. Should the owner drop the batch in
    flight (its full policy), its segment goes with it, and a read-ahead planned after that
    finds nothing; one planned before reads records that were still there. It never reports
    anything itself, so the owner sees reports in order.
    """

    def __init__(self, channel: Channel, wake_bytes: int, directory: Path | None = None) -> None:
        self._channel = channel
        self.wake = threading.Event()
        self.wake_bytes = wake_bytes
        #: The spool directory: the shipper writes ``in-flight`` there before each push
        #: (``_reconcile``), itself, so that it is on disk before the push begins.
        self.directory = directory
        # The owner's unacknowledged bytes as last told, less what was acknowledged since.
        self._pending = 0
        self._ahead: _ReadAhead | None = None
        self._acked_end: SpoolPosition | None = None  # where the last whole ack ended

    def note_pending(self, pending_bytes: int) -> None:
        self._pending = pending_bytes

    def pending_bytes(self) -> int:
        return self._pending

    def peek_batch(
        self, *, max_records: int = 10_000, max_bytes: int = 1 << 20
    ) -> RemoteBatch | None:
        if self._channel.closed:
            # The owner is gone, perhaps killed: a successor may be reconciling this spool
            # with Loki, and a batch read ahead must not be pushed behind its back.
            raise SpoolError("the spool's owner is gone")
        ahead, self._ahead = self._ahead, None
        batch = ahead.take(self._acked_end) if ahead is not None else None
        if batch is None:
            batch = self._read(None, max_records, max_bytes)
        if batch is not None:
            self._ahead = _ReadAhead(self, batch, max_records, max_bytes)
        return batch

    def _read(
        self, after: SpoolPosition | None, max_records: int, max_bytes: int
    ) -> RemoteBatch | None:
        """The batch at the head, or (read-ahead) the one at ``after``; None when there is
        none (for a read-ahead: or ``after`` is gone, dropped by the owner's full policy)."""
        window_bytes = max(1 << 16, min(max_bytes, 1 << 22))
        while True:
            fields = {} if after is None else {"after": list(after)}
            answer = self._channel.ask("plan", **fields)
            self._pending = answer["pending"]
            if answer["plan"] is None:
                return None
            seq, path, offset, limit, checked, sealed = answer["plan"]
            start = SpoolPosition(seq, offset)
            try:
                records, end, payload_bytes, torn, corrupt = read_segment(
                    Path(path), offset, limit, checked, max_records, max_bytes, window_bytes
                )
            except OSError as exc:
                if after is not None:
                    return None
                self._channel.ask(
                    "read_failed", start=[seq, offset], sealed=sealed, reason=str(exc)
                )
                continue
            if records:
                return RemoteBatch(
                    tuple(records), SpoolPosition(seq, end), start, payload_bytes, torn, corrupt
                )
            if after is not None:
                return None
            # Damage only: the owner moves its head past it, and the next plan reads on.
            self._channel.send(
                "report",
                start=[seq, offset],
                end=end,
                count=0,
                payload=0,
                torn=torn,
                corrupt=corrupt,
            )

    def ack(self, batch: RemoteBatch, /) -> None:
        count = len(batch.records)
        # A part of a batch (acked by the delivery when stop cuts it short) ends where the
        # read-ahead does not start: the next peek then reads from the head.
        self._acked_end = batch.end
        self._channel.send(
            "report",
            start=list(batch.start),
            end=batch.end.offset,
            count=count,
            payload=batch.payload_bytes,
            torn=batch.torn,
            corrupt=batch.corrupt,
        )
        self._pending = max(0, self._pending - count * HEADER_BYTES - batch.payload_bytes)

    def sync_if_due(self) -> bool:
        # The owner syncs on its own schedule; this call, made on every wake and before every
        # backoff wait, is the shipper's moment to tell the owner its counters.
        self._channel.send("stats")
        return False

    def stats(self) -> _Records:
        return _Records(int(self._channel.ask("records")["records"]))


class _ReadAhead:
    """The batch after ``batch``, planned and read on a thread of its own."""

    def __init__(
        self, spool: RemoteSpool, batch: RemoteBatch, max_records: int, max_bytes: int
    ) -> None:
        self._after = batch.end
        self._result: RemoteBatch | None = None
        self._thread = threading.Thread(
            target=self._run,
            args=(spool, max_records, max_bytes),
            name="agent-logging-read-ahead",
            daemon=True,
        )
        self._thread.start()

    def _run(self, spool: RemoteSpool, max_records: int, max_bytes: int) -> None:
        with contextlib.suppress(SpoolError):  # the owner gone or refusing: read from the head
            self._result = spool._read(self._after, max_records, max_bytes)

    def take(self, acked_end: SpoolPosition | None) -> RemoteBatch | None:
        """The batch read ahead, if the one before it was acknowledged whole."""
        self._thread.join()
        if acked_end != self._after:
            return None
        return self._result


def command() -> list[str]:
    """The command that starts a shipper process: this interpreter, running this module."""
    return [sys.executable, "-m", "agent_logging.shipping._child"]


def default_labels(settings: Settings) -> dict[str, str]:
    """The label values of records that lack them, from the service's settings."""
    return {"service_name": settings.service, "layer": settings.layer, "env": settings.env}


def config_for(settings: Settings, wake_bytes: int, dead_letter_path: Path) -> dict[str, Any]:
    """The configuration a shipper process reads (first line of its stdin), from the
    service's settings: the Loki client's options and the shipper's."""
    basic = None
    if settings.loki_username is not None:
        basic = [settings.loki_username, settings.loki_password or ""]
    return {
        "url": settings.loki_url,
        "tenant": settings.loki_tenant,
        "basic_auth": basic,
        "bearer_token": settings.loki_bearer_token,
        "ca_bundle": settings.loki_ca_bundle,
        "encoding": settings.loki_encoding,
        "max_batch_bytes": settings.batch_max_bytes,
        "batch_interval_s": settings.batch_interval_s,
        "wake_bytes": wake_bytes,
        "dead_letter_path": str(dead_letter_path),
        "spool_dir": str(dead_letter_path.parent),
        "node_id_label": settings.node_id_label,
        "default_labels": default_labels(settings),
    }


def _shipper(
    config: dict[str, Any], channel: Channel, stopping: threading.Event
) -> tuple[Shipper, RemoteSpool]:
    basic = config["basic_auth"]
    client = LokiClient(
        config["url"],
        tenant=config["tenant"],
        basic_auth=tuple(basic) if basic else None,
        bearer_token=config["bearer_token"],
        ca_bundle=config["ca_bundle"],
        encoding=config["encoding"],
    )
    spool_dir = config.get("spool_dir")
    spool = RemoteSpool(channel, config["wake_bytes"], Path(spool_dir) if spool_dir else None)
    shipper = Shipper(
        spool,
        client,
        max_batch_bytes=config["max_batch_bytes"],
        batch_interval_s=config["batch_interval_s"],
        dead_letter_path=Path(config["dead_letter_path"]),
        node_id_label=config["node_id_label"],
        default_labels=config["default_labels"],
        # Once stopping, a request cut short is no failure to report.
        on_error=lambda message: (
            None if stopping.is_set() else channel.send("error", message=message)
        ),
    )
    channel.stamp = lambda: {"stats": shipper.stats()}
    return shipper, spool


def main() -> int:
    """Run the shipper until stdin ends or the owner says ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol gets stdout's pipe to itself: anything else that writes to stdout (a
    # print() in some library, at the Python or the C level) goes to stderr instead.
    outgoing = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    incoming = sys.stdin.buffer
    config = orjson.loads(incoming.readline() or b"null")
    if not isinstance(config, dict):
        return 2
    channel = Channel(incoming, outgoing)
    stopping = threading.Event()
    shipper, spool = _shipper(config, channel, stopping)

    def on_note(message: dict[str, Any]) -> bool:
        op = message.get("op")
        if op == "wake":
            spool.note_pending(message["pending"])
            spool.wake.set()
        elif op == "flush":
            shipper.request_flush()
        elif op == "stop":
            stopping.set()
            return False
        return True

    shipper.start()
    try:
        channel.serve(on_note)
    finally:
        stopping.set()  # the owner said stop, or is gone: nobody to report to
        shipper.halt(_HALT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())

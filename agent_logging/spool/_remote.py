"""The owner's side of a shipper process's messages about the spool (``shipping._process``).

The shipper process reads the segment files itself, but the spool's state stays with the
process that owns the spool: per batch it asks for a plan, reads and delivers, then reports
the outcome (the read side for another process in ``_spool``'s module doc).
:func:`answer` turns each of its messages into a call of the open spool's methods
(:meth:`~agent_logging.spool._spool.Spool.plan_read`,
:meth:`~agent_logging.spool._spool.Spool.plan_read_after`,
:meth:`~agent_logging.spool._spool.Spool.report_read`,
:meth:`~agent_logging.spool._spool.Spool.read_failed`) and their results into the answer
sent back; it holds no state of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_logging.spool._segments import SpoolPosition

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["answer"]


def answer(spool: Spool, message: dict[str, Any]) -> tuple[dict[str, Any] | None, int]:
    """Act on one of the shipper process's messages about the spool (``shipping._process``).

    Returns:
        The answer to a request (None for a note, or a message not about the spool), and how
        many records the message acknowledged.

    Raises:
        SpoolError: the spool is closed, or cannot be read (``read_failed``).
        KeyError, TypeError, ValueError: a message that lacks a field or has a wrong one.
    """
    op = message.get("op")
    if op == "plan":
        after = message.get("after")
        planned = (
            spool.plan_read() if after is None else spool.plan_read_after(SpoolPosition(*after))
        )
        return {
            "plan": None if planned is None else list(planned),
            "pending": spool.pending_bytes(),
        }, 0
    if op == "report":
        count = int(message["count"])
        acked = spool.report_read(
            SpoolPosition(*message["start"]),
            int(message["end"]),
            count,
            int(message["payload"]),
            int(message["torn"]),
            int(message["corrupt"]),
        )
        return None, count if acked else 0
    if op == "read_failed":
        start = SpoolPosition(*message["start"])
        spool.read_failed(start, bool(message["sealed"]), str(message["reason"]))
        return {}, 0
    if op == "records":
        return {"records": spool.stats().records}, 0
    return None, 0

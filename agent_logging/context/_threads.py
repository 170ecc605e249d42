"""Carrying the current context into threads and executors.

asyncio tasks copy the context they are created in, and so does ``asyncio.to_thread``; but a
plain ``threading.Thread``, ``ThreadPoolExecutor.submit`` and ``loop.run_in_executor`` start
from an empty context, so identifiers bound by a request would vanish in the worker. These
helpers snapshot the caller's context at hand-off time and run the work inside the snapshot.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["ContextThreadPoolExecutor", "carry_context"]

P = ParamSpec("P")
R = TypeVar("R")


def carry_context(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``fn`` to run in a copy of the context current *now* (not when it is called).

    Use it for ``threading.Thread(target=carry_context(work))`` or
    ``loop.run_in_executor(None, carry_context(work))``.
    """
    snapshot = contextvars.copy_context()

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        # A context can be entered by one thread at a time: run each call in its own copy.
        return snapshot.copy().run(fn, *args, **kwargs)

    return run


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in the submitter's context."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        snapshot = contextvars.copy_context()

        def run() -> R:
            return snapshot.run(fn, *args, **kwargs)

        return super().submit(run)

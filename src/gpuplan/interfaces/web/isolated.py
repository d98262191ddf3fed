"""One API request's computation in a child process that is killed at the time limit.

A worker thread cannot be stopped: before this, a request past the limit got its 422 while its
search kept a core busy (issue 22: ~45 s of CPU after the answer). Here the work runs in a
``fork``ed child (no pickling of the call: the child inherits it), the answer comes back through a
pipe, and at the limit the child is killed, so no CPU is spent after the answer. Errors come back
whole (:meth:`gpuplan.core.errors.GpuplanError.__reduce__`; pydantic's ``ValidationError`` pickles
too). A result or error that does not pickle is recomputed in a worker thread, as before, with
the same limit.

``fork`` is POSIX-only; where it is missing (Windows) the worker thread is used, abandoned at the
limit. Measured on the 2-core development machine: a fork + pipe round trip costs ~5-15 ms per
request beside a recommend of 100-1000 ms.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

import anyio

T = TypeVar("T")

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
"""Whether a request can run in a killable child (POSIX)."""


class Unpicklable(Exception):
    """The child's outcome could not cross the pipe; the caller recomputes it in a thread."""


async def run_killable(fn: Callable[[], T], *, limit_s: float) -> T:
    """``fn()`` in a forked child, killed at ``limit_s`` (``TimeoutError``); its exception re-raised."""
    if not FORK_AVAILABLE:
        with anyio.fail_after(limit_s):
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(fn, sender), daemon=True)
    child.start()
    sender.close()
    try:
        with anyio.fail_after(limit_s):
            kind, value = await anyio.to_thread.run_sync(_receive, receiver, abandon_on_cancel=True)
    finally:
        _stop(child)
        receiver.close()
    if kind == "ok":
        return cast(T, value)
    raise cast(BaseException, value)


async def bounded(fn: Callable[[], T], *, limit_s: float) -> T:
    """:func:`run_killable`, falling back to a worker thread when the outcome does not pickle."""
    try:
        return await run_killable(fn, limit_s=limit_s)
    except Unpicklable:
        with anyio.fail_after(limit_s):
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


def _receive(receiver: Connection) -> tuple[str, Any]:
    try:
        message: tuple[str, Any] = receiver.recv()
    except EOFError:  # the child died without answering (killed, or crashed)
        raise Unpicklable("the child process ended without an answer") from None
    return message


def _child(fn: Callable[[], Any], sender: Connection) -> None:
    try:
        outcome: tuple[str, Any] = ("ok", fn())
    except BaseException as exc:  # the parent re-raises it: nothing is swallowed
        outcome = ("error", exc)
    try:
        sender.send_bytes(pickle.dumps(outcome))
    except Exception:  # an outcome that does not pickle: the parent recomputes it
        sender.close()
    os._exit(0)  # no atexit handlers or inherited server state run in the child


def _stop(child: Any) -> None:
    if child.is_alive():
        child.kill()
    child.join()

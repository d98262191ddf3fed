"""One API request's computation in a child process that is killed at the time limit.

A worker thread cannot be stopped: before this, a request past the limit got its 422 while its
search kept a core busy (issue 22: ~45 s of CPU after the answer). Here the work runs in a
``fork``ed child (no pickling of the call: the child inherits it), the answer comes back through a
pipe, and at the limit the child is killed, so no CPU is spent after the answer. Errors come back
whole (:meth:`gpuplan.core.errors.GpuplanError.__reduce__`; pydantic's ``ValidationError`` pickles
too). A result or error that the child reports it cannot pickle is recomputed in a worker thread
with the time left; a child that dies without answering (killed by the OOM killer, a crash) is a
``ChildDied`` error, never recomputed in the server.

``fork`` is used on Linux only (macOS's system libraries are not fork-safe, Windows has no fork);
elsewhere the worker thread is used, abandoned at the limit. Measured by the review on the 2-core
development machine (TestClient, median of 5): fork adds ~30 ms to a ``fit`` (39 vs 7 ms) and ~90-100 ms
to a ``recommend`` (210 vs 110 ms) or ``train-plan``, since the children's caches never reach the parent.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

import anyio

T = TypeVar("T")

FORK_AVAILABLE = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
"""Whether a request runs in a killable child (Linux; see the module docstring)."""
UNPICKLABLE = "unpicklable"
"""The child's message when its outcome cannot cross the pipe."""


class Unpicklable(Exception):
    """The child's outcome could not cross the pipe; the caller recomputes it in a thread."""


class ChildDied(RuntimeError):
    """The child ended without answering (killed from outside, or crashed)."""


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
    if kind == UNPICKLABLE:
        raise Unpicklable(str(value))
    raise cast(BaseException, value)


async def bounded(fn: Callable[[], T], *, limit_s: float) -> T:
    """:func:`run_killable`, falling back to a worker thread, with the time left, when the child
    reports an outcome it cannot pickle."""
    started = time.monotonic()
    try:
        return await run_killable(fn, limit_s=limit_s)
    except Unpicklable:
        with anyio.fail_after(max(limit_s - (time.monotonic() - started), 0.0)):
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


def _receive(receiver: Connection) -> tuple[str, Any]:
    try:
        message: tuple[str, Any] = receiver.recv()
    except EOFError:
        raise ChildDied("the computation ended without an answer (killed or crashed)") from None
    return message


def _child(fn: Callable[[], Any], sender: Connection) -> None:
    try:
        outcome: tuple[str, Any] = ("ok", fn())
    except BaseException as exc:  # the parent re-raises it: nothing is swallowed
        outcome = ("error", exc)
    try:
        payload = pickle.dumps(outcome)
        pickle.loads(payload)  # an error whose class cannot be rebuilt fails here, not in the parent
    except Exception as exc:  # the parent recomputes it in a thread
        payload = pickle.dumps((UNPICKLABLE, f"{type(exc).__name__}: {exc}"))
    sender.send_bytes(payload)
    os._exit(0)  # no atexit handlers or inherited server state run in the child


def _stop(child: Any) -> None:
    if child.is_alive():
        child.kill()
    child.join()

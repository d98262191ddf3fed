"""The schedule sharded over worker processes, for rates one Python process cannot hold.

Worker ``k`` of ``n`` sends every request whose index is ``k`` modulo ``n`` (open loop: at its
scheduled time; closed loop: ``concurrency`` split between the workers). All workers share one
origin on the system-wide monotonic clock, set by this process once every worker has started and
built its plan, so the merged schedule is the same as in one process. Records come back over a queue
as they complete and go to the sink (the results store) here; the parent needs no event loop.

Workers die with the parent (:func:`die_with_parent`): a worker that outlived a ``kill -9`` of the parent
would keep sending its share of the schedule with nobody recording it, and ``--resume`` would send
those indices again.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import wait
from multiprocessing.synchronize import Event
from typing import Any

from gpuplan.adapters.bench.load.config import REVEAL_SECRETS, LoadConfig
from gpuplan.adapters.bench.load.loops import Outcome, Sink, drive, first_origin, new_loop
from gpuplan.adapters.bench.load.workload import Plan, build
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import BenchmarkError

START_TIMEOUT_S = 120.0
POLL_S = 0.5
PR_SET_PDEATHSIG = 1
"""prctl option: the signal this process gets when its parent dies (<linux/prctl.h>;
https://man7.org/linux/man-pages/man2/pr_set_pdeathsig.2const.html)."""
ORPHAN_EXIT = 70
"""Exit status of a worker that found its parent gone (EX_SOFTWARE, sysexits.h)."""


def _watch_parent(sentinel: int) -> None:
    wait([sentinel])  # readable once the parent's end of the pipe is closed: the parent is gone
    os._exit(ORPHAN_EXIT)


def die_with_parent(parent_pid: int) -> None:
    """End this worker when the parent dies, however it dies: on Linux the kernel sends SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``); everywhere a thread waits on the parent's sentinel (the pipe
    multiprocessing keeps to it) and exits the process. A parent gone before either was set: exit now."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no usable libc: the sentinel thread still watches
            pass
    parent = mp.parent_process()
    if parent is not None and parent.sentinel is not None:
        threading.Thread(target=_watch_parent, args=(parent.sentinel,), daemon=True).start()
    if os.getppid() != parent_pid:
        os._exit(ORPHAN_EXIT)


def _worker(
    config_json: str,
    shard: int,
    parts: int,
    skip: list[int],
    start: Event,
    origin: Any,
    out: Any,
    parent_pid: int,
) -> None:
    import asyncio

    die_with_parent(parent_pid)
    try:
        config = LoadConfig.model_validate_json(config_json)
        plan = build(config)
        out.put(("ready", shard, None))
        if not start.wait(START_TIMEOUT_S):
            return
        cpu = time.process_time()
        with asyncio.Runner(loop_factory=new_loop) as runner:
            outcome = runner.run(
                drive(
                    config,
                    plan,
                    lambda r: out.put(("record", shard, r)),
                    set(skip),
                    (shard, parts),
                    origin.value,
                )
            )
        out.put(("end", shard, (outcome.loop_lag_ms, time.process_time() - cpu, outcome.stopped)))
    except BaseException as exc:  # reported to the parent, which fails the run
        out.put(("error", shard, f"{type(exc).__name__}: {exc}"))


def _receive(out: Any, procs: list[Any], deadline: float) -> tuple[str, int, Any] | None:
    try:
        message: tuple[str, int, Any] = out.get(timeout=POLL_S)
        return message
    except queue.Empty:
        if time.monotonic() > deadline:
            raise BenchmarkError("client workers did not finish in time") from None
        if not all(p.is_alive() for p in procs):
            raise BenchmarkError("a client worker process died") from None
        return None


def _wait_ready(out: Any, procs: list[Any]) -> None:
    ready = 0
    deadline = time.monotonic() + START_TIMEOUT_S
    while ready < len(procs):
        message = _receive(out, procs, deadline)
        if message is not None and message[0] == "error":
            raise BenchmarkError(f"client worker {message[1]} failed: {message[2]}")
        ready += message is not None and message[0] == "ready"


def _collect(config: LoadConfig, out: Any, procs: list[Any], sink: Sink, outcome: Outcome) -> None:
    ended = 0
    deadline = time.monotonic() + config.warmup_s + config.duration_s + config.request_timeout_s + 60.0
    while ended < len(procs):
        message = _receive(out, procs, deadline)
        if message is None:
            continue
        kind, shard, data = message
        if kind == "record":
            assert isinstance(data, RequestRecord)
            outcome.records.append(data)
            sink(data)
        elif kind == "end":
            outcome.loop_lag_ms += data[0]
            outcome.cpu_s += data[1]
            outcome.stopped = outcome.stopped or data[2]
            ended += 1
        elif kind == "error":
            raise BenchmarkError(f"client worker {shard} failed: {data}")


def run_sharded(config: LoadConfig, plan: Plan, sink: Sink, skip: set[int]) -> Outcome:
    """Run ``config`` on ``config.workers`` processes; ``sink`` gets every record here, as it completes."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Event()
    origin = ctx.Value("d", 0.0)
    parts = config.workers
    reveal = {REVEAL_SECRETS: True}  # the key and headers go to the workers over a pipe, never to disk
    procs = [
        ctx.Process(
            target=_worker,
            name=f"gpuplan-load-{k}",
            daemon=True,
            args=(
                config.model_dump_json(context=reveal),
                k,
                parts,
                sorted(skip),
                start,
                origin,
                out,
                os.getpid(),
            ),
        )
        for k in range(parts)
    ]
    outcome = Outcome()
    cpu = time.process_time()
    for proc in procs:
        proc.start()
    try:
        _wait_ready(out, procs)
        origin.value = first_origin(config, plan, skip) + 0.2  # workers need a moment to wake
        start.set()
        _collect(config, out, procs, sink, outcome)
    finally:
        for proc in procs:
            proc.join(5.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(5.0)
    outcome.cpu_s += time.process_time() - cpu
    return outcome

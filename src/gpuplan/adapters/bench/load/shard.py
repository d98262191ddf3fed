"""The schedule sharded over worker processes, for rates one Python process cannot hold.

Worker ``k`` of ``n`` sends every request whose index is ``k`` modulo ``n`` (open loop: at its
scheduled time; closed loop: ``concurrency`` split between the workers). All workers share one
origin on the system-wide monotonic clock, set by this process once every worker has started and
built its plan, so the merged schedule is the same as in one process. Records come back over a queue
as they complete and go to the sink (the results store) here; the parent needs no event loop.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from multiprocessing.synchronize import Event
from typing import Any

from gpuplan.adapters.bench.load.config import REVEAL_SECRETS, LoadConfig
from gpuplan.adapters.bench.load.loops import Outcome, Sink, drive, first_origin, new_loop
from gpuplan.adapters.bench.load.workload import Plan, build
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import BenchmarkError

START_TIMEOUT_S = 120.0
POLL_S = 0.5


def _worker(
    config_json: str, shard: int, parts: int, skip: list[int], start: Event, origin: Any, out: Any
) -> None:
    import asyncio

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
            args=(config.model_dump_json(context=reveal), k, parts, sorted(skip), start, origin, out),
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

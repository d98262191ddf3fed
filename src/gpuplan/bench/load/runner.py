"""The load loops: open loop (sends held to a schedule, never gated on responses) and closed loop.

Open loop: one dispatcher sleeps until each scheduled time and starts the request as its own task;
nothing caps the requests in flight, so a slow server cannot slow the sending (no coordinated
omission) and a freed slot can never release a burst. Each record keeps its scheduled and actual
send time; a monitor samples the event loop's lag every 10 ms. Both are reported as the client's
own lateness.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import httpx

from gpuplan.bench.load import client
from gpuplan.bench.load.config import LoadConfig
from gpuplan.bench.load.pool import fast_client
from gpuplan.bench.load.record import RequestRecord
from gpuplan.bench.load.schedule import offsets_s
from gpuplan.bench.tokens import synthetic_prompt

Sink = Callable[[RequestRecord], None]
LAG_PERIOD_S = 0.01
START_DELAY_S = 0.05


@dataclass
class Outcome:
    """The records of this session and the event loop's sampled lag (ms)."""

    records: list[RequestRecord] = field(default_factory=list)
    loop_lag_ms: list[float] = field(default_factory=list)


async def _monitor(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        start = loop.time()
        await asyncio.sleep(LAG_PERIOD_S)
        lags.append((loop.time() - start - LAG_PERIOD_S) * 1e3)


async def run(config: LoadConfig, sink: Sink, skip: Collection[int] = ()) -> Outcome:
    """Run the load; ``sink`` gets every record as it completes; indices in ``skip`` are not sent."""
    outcome = Outcome()
    stop = asyncio.Event()
    monitor = asyncio.create_task(_monitor(outcome.loop_lag_ms, stop))

    def keep(record: RequestRecord) -> None:
        outcome.records.append(record)
        sink(record)

    try:
        async with fast_client(config.request_timeout_s) as http:
            if config.open_loop:
                await _open_loop(config, http, keep, set(skip))
            else:
                await _closed_loop(config, http, keep, set(skip))
    finally:
        stop.set()
        await monitor
    return outcome


async def _one(config: LoadConfig, http: httpx.AsyncClient, index: int, offset: float, origin: float,
               keep: Sink) -> None:
    body = client.request_body(config, synthetic_prompt(config.input_tokens, config.seed * 1_000_003 + index))
    record = await client.send(http, config, body, index, offset, origin, offset < config.warmup_s,
                               config.input_tokens)
    keep(record)


async def _open_loop(config: LoadConfig, http: httpx.AsyncClient, keep: Sink, skip: set[int]) -> None:
    loop = asyncio.get_running_loop()
    todo = [(i, t) for i, t in enumerate(offsets_s(config)) if i not in skip]
    if not todo:
        return
    # On resume the remaining schedule keeps its spacing; its first request is due now.
    origin = loop.time() + START_DELAY_S - todo[0][1]
    tasks: set[asyncio.Task[None]] = set()
    for index, offset in todo:
        delay = origin + offset - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(_one(config, http, index, offset, origin, keep))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks)


async def _closed_loop(config: LoadConfig, http: httpx.AsyncClient, keep: Sink, skip: set[int]) -> None:
    loop = asyncio.get_running_loop()
    origin = loop.time()
    end = origin + config.warmup_s + config.duration_s
    counter = (i for i in itertools.count() if i not in skip)
    sent = itertools.count()

    async def worker() -> None:
        while loop.time() < end and next(sent) < config.max_requests:
            await _one(config, http, next(counter), loop.time() - origin, origin, keep)

    assert config.concurrency is not None
    await asyncio.gather(*(worker() for _ in range(config.concurrency)))

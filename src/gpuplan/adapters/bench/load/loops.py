"""The load loops: open loop (sends held to a schedule, never gated on responses) and closed loop.

Open loop: one dispatcher prepares the next request's bytes, sleeps until its scheduled time and
starts it as its own task; nothing caps the requests in flight, so a slow server cannot slow the
sending (no coordinated omission) and a freed slot can never release a burst. Each record keeps its
scheduled and actual send time; a monitor samples the event loop's lag every 10 ms. Both are reported
as the client's own lateness. :func:`drive` runs one process's share of the schedule;
:mod:`gpuplan.adapters.bench.load.runner` runs it in this process or, with ``workers > 1``, in worker
processes (:mod:`gpuplan.adapters.bench.load.shard`).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from gpuplan.adapters.bench.load import client
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.wire import Pool, clock
from gpuplan.adapters.bench.load.workload import Plan
from gpuplan.adapters.store.records import RequestRecord

Sink = Callable[[RequestRecord], None]
Shard = tuple[int, int]
LAG_PERIOD_S = 0.01
START_DELAY_S = 0.05


@dataclass(repr=False)
class Outcome:
    """The records of this session, the event loop's sampled lag (ms) and the client's CPU seconds."""

    records: list[RequestRecord] = field(default_factory=list)
    loop_lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0


def new_loop() -> asyncio.AbstractEventLoop:
    """asyncio's own event loop. uvloop is deliberately not used: under uvloop 0.23 the raw HTTP/1.1
    protocol never completed a request (every open-loop run timed out), so it is unsupported."""
    return asyncio.new_event_loop()


def first_origin(config: LoadConfig, plan: Plan, skip: Collection[int]) -> float:
    """The clock time of offset 0: on resume the remaining schedule keeps its spacing and starts now."""
    first = next((t for i, t in enumerate(plan.offsets) if i not in skip), 0.0)
    return clock() + START_DELAY_S - (first if config.open_loop else 0.0)


async def _monitor(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        start = clock()
        await asyncio.sleep(LAG_PERIOD_S)
        lags.append((clock() - start - LAG_PERIOD_S) * 1e3)


async def drive(
    config: LoadConfig, plan: Plan, sink: Sink, skip: set[int], shard: Shard, origin: float
) -> Outcome:
    """This process's share (``index % shard[1] == shard[0]``) of the load, on the running loop."""
    outcome = Outcome()
    stop = asyncio.Event()
    monitor = asyncio.create_task(_monitor(outcome.loop_lag_ms, stop))

    def keep(record: RequestRecord) -> None:
        outcome.records.append(record)
        sink(record)

    pool = Pool(config.url)
    try:
        if config.open_loop:
            await _open_loop(config, plan, pool, keep, skip, shard, origin)
        else:
            await _closed_loop(config, plan, pool, keep, skip, shard, origin)
    finally:
        pool.close()
        stop.set()
        await monitor
    return outcome


def _payload(config: LoadConfig, plan: Plan, pool: Pool, index: int) -> tuple[bytes, int]:
    prompt, input_tokens, output_tokens = plan.request(config, index)
    return pool.request_bytes(config.path, client.request_body(config, prompt, output_tokens)), input_tokens


async def _one(
    config: LoadConfig,
    pool: Pool,
    prepared: tuple[bytes, int],
    index: int,
    offset: float,
    origin: float,
    keep: Sink,
) -> None:
    payload, input_tokens = prepared
    keep(
        await client.send(
            pool, config, payload, index, offset, origin, offset < config.warmup_s, input_tokens
        )
    )


class _Dispatcher:
    """Open-loop sends by timer callbacks: at each wake every due request is started (no task per
    request), the next one's bytes are prepared, and the timer is armed for its time."""

    def __init__(
        self,
        config: LoadConfig,
        plan: Plan,
        pool: Pool,
        keep: Sink,
        todo: list[tuple[int, float]],
        origin: float,
    ) -> None:
        self.config, self.plan, self.pool, self.keep, self.todo, self.origin = (
            config,
            plan,
            pool,
            keep,
            todo,
            origin,
        )
        self.loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = self.loop.create_future()
        self.next = 0
        self.in_flight = 0
        self.prepared = _payload(config, plan, pool, todo[0][0]) if todo else (b"", 0)

    def fire(self) -> None:
        todo, origin, warmup = self.todo, self.origin, self.config.warmup_s
        now = clock()
        while self.next < len(todo) and origin + todo[self.next][1] <= now:
            index, offset = todo[self.next]
            payload, input_tokens = self.prepared
            self.next += 1
            self.in_flight += 1
            client.start(
                self.pool,
                self.config,
                payload,
                index,
                offset,
                origin,
                offset < warmup,
                input_tokens,
                self._done,
            )
            if self.next < len(todo):
                self.prepared = _payload(self.config, self.plan, self.pool, todo[self.next][0])
            now = clock()
        if self.next < len(todo):
            self.loop.call_later(origin + todo[self.next][1] - clock(), self.fire)
        else:
            self._maybe_finished()

    def _done(self, record: RequestRecord) -> None:
        self.in_flight -= 1
        try:
            self.keep(record)
        finally:
            self._maybe_finished()

    def _maybe_finished(self) -> None:
        if self.next >= len(self.todo) and self.in_flight == 0 and not self.finished.done():
            self.finished.set_result(None)


async def _open_loop(
    config: LoadConfig, plan: Plan, pool: Pool, keep: Sink, skip: set[int], shard: Shard, origin: float
) -> None:
    part, parts = shard
    todo = [(i, t) for i, t in enumerate(plan.offsets) if i % parts == part and i not in skip]
    dispatcher = _Dispatcher(config, plan, pool, keep, todo, origin)
    dispatcher.fire()
    last = origin + (todo[-1][1] if todo else 0.0)
    # Every request has its own timeout; this bound only guards against a bug leaving one unanswered.
    async with asyncio.timeout_at(
        asyncio.get_running_loop().time() + max(last - clock(), 0.0) + config.request_timeout_s + 30.0
    ):
        await dispatcher.finished


async def _closed_loop(
    config: LoadConfig, plan: Plan, pool: Pool, keep: Sink, skip: set[int], shard: Shard, origin: float
) -> None:
    part, parts = shard
    end = origin + config.warmup_s + config.duration_s
    counter = (i for i in itertools.count(part, parts) if i not in skip)
    sent = itertools.count()
    limit = math.ceil(config.max_requests / parts)
    assert config.concurrency is not None
    workers = len(range(part, config.concurrency, parts))
    delay = origin - clock()
    if delay > 0:
        await asyncio.sleep(delay)

    async def worker() -> None:
        while clock() < end and next(sent) < limit:
            index = next(counter)
            await _one(
                config, pool, _payload(config, plan, pool, index), index, clock() - origin, origin, keep
            )

    await asyncio.gather(*(worker() for _ in range(workers)))

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
from gpuplan.adapters.bench.load.brakes import Brakes, pause_s
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
    """The records of this session, the event loop's sampled lag (ms), the client's CPU seconds, and
    whether ``--max-errors`` stopped the run."""

    records: list[RequestRecord] = field(default_factory=list)
    loop_lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    stopped: bool = False


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
    brakes = Brakes(config, shard[1])

    def keep(record: RequestRecord) -> None:
        outcome.records.append(record)
        brakes.note(record)
        sink(record)

    pool = Pool(config.url, config.http_headers())
    try:
        if config.open_loop:
            await _open_loop(config, plan, pool, keep, skip, shard, origin, brakes)
        else:
            await _closed_loop(config, plan, pool, keep, skip, shard, origin, brakes)
    finally:
        pool.close()
        stop.set()
        await monitor
    outcome.stopped = brakes.stopped
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
) -> tuple[bool, float | None]:
    """Send one request and keep its record; returns whether it succeeded and the ``Retry-After`` (s) its
    answer asked for."""
    payload, input_tokens = prepared
    record, retry_after_s = await client.send(
        pool, config, payload, index, offset, origin, offset < config.warmup_s, input_tokens
    )
    keep(record)
    return record.ok, retry_after_s


class _Dispatcher:
    """Open-loop sends by timer callbacks: at each wake every due request is started (no task per
    request), the next one's bytes are prepared, and the timer is armed for its time. ``cap``
    (``--max-concurrency``) holds a due request until one in flight finishes; a ``Retry-After`` holds
    every send until it has passed; ``brakes`` (``--max-errors``) stop the sending."""

    def __init__(
        self,
        config: LoadConfig,
        plan: Plan,
        pool: Pool,
        keep: Sink,
        todo: list[tuple[int, float]],
        origin: float,
        brakes: Brakes,
        cap: float,
    ) -> None:
        self.config, self.plan, self.pool, self.keep, self.todo = config, plan, pool, keep, todo
        self.origin, self.brakes, self.cap = origin, brakes, cap
        self.loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = self.loop.create_future()
        self.next = 0
        self.in_flight = 0
        self.hold_until = 0.0
        self.progress = clock()
        self.timer: asyncio.TimerHandle | None = None
        self.prepared = _payload(config, plan, pool, todo[0][0]) if todo else (b"", 0)

    def fire(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        todo, origin, warmup = self.todo, self.origin, self.config.warmup_s
        now = clock()
        while self._may_send() and origin + todo[self.next][1] <= now and now >= self.hold_until:
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
            now = self.progress = clock()
        if self._may_send():
            due = max(origin + todo[self.next][1], self.hold_until)
            self.timer = self.loop.call_later(due - now, self.fire)
        self._maybe_finished()

    def _may_send(self) -> bool:
        """Whether the next request may go when due: not stopped, not all sent, a slot under the cap."""
        return not self.brakes.stopped and self.next < len(self.todo) and self.in_flight < self.cap

    def _done(self, record: RequestRecord, retry_after_s: float | None) -> None:
        blocked = self.in_flight >= self.cap
        self.in_flight -= 1
        self.progress = clock()
        if retry_after_s:
            self.hold_until = max(self.hold_until, self.progress + retry_after_s)
        try:
            self.keep(record)
        finally:
            if blocked and self._may_send():
                self.fire()
            self._maybe_finished()

    def _maybe_finished(self) -> None:
        done_sending = self.next >= len(self.todo) or self.brakes.stopped
        if done_sending and self.in_flight == 0 and not self.finished.done():
            self.finished.set_result(None)

    def stalled(self, grace_s: float) -> bool:
        """Nothing sent or finished for ``grace_s`` past every reason to wait (a bug guard)."""
        due = self.origin + self.todo[self.next][1] if self.next < len(self.todo) else 0.0
        return clock() > max(self.progress, self.hold_until, due) + grace_s


STALL_GRACE_S = 30.0
"""Seconds past a request's own timeout before a silent open loop counts as stalled (a bug guard,
not a measurement: any value well above one event-loop turn works)."""


async def _open_loop(
    config: LoadConfig,
    plan: Plan,
    pool: Pool,
    keep: Sink,
    skip: set[int],
    shard: Shard,
    origin: float,
    brakes: Brakes,
) -> None:
    part, parts = shard
    todo = [(i, t) for i, t in enumerate(plan.offsets) if i % parts == part and i not in skip]
    cap = (
        math.inf
        if config.max_concurrency is None
        else max(len(range(part, config.max_concurrency, parts)), 1)
    )
    dispatcher = _Dispatcher(config, plan, pool, keep, todo, origin, brakes, cap)
    dispatcher.fire()
    # Every request has its own timeout; this bound only guards against a bug leaving one unanswered.
    grace_s = config.request_timeout_s + STALL_GRACE_S
    while not dispatcher.finished.done():
        await asyncio.wait([dispatcher.finished], timeout=min(grace_s, 1.0))
        if not dispatcher.finished.done() and dispatcher.stalled(grace_s):
            raise TimeoutError("the open loop made no progress (a request left unanswered)")


async def _closed_loop(
    config: LoadConfig,
    plan: Plan,
    pool: Pool,
    keep: Sink,
    skip: set[int],
    shard: Shard,
    origin: float,
    brakes: Brakes,
) -> None:
    part, parts = shard
    end = origin + config.warmup_s + config.duration_s
    count = config.num_prompts if config.num_prompts is not None else math.inf
    counter = (i for i in itertools.count(part, parts) if i not in skip)
    sent = itertools.count()
    limit = math.ceil(config.max_requests / parts)
    assert config.concurrency is not None
    workers = len(range(part, config.concurrency, parts))
    delay = origin - clock()
    if delay > 0:
        await asyncio.sleep(delay)

    async def worker() -> None:
        failures = 0
        while clock() < end and not brakes.stopped and next(sent) < limit:
            index = next(counter)
            if index >= count:
                return
            ok, retry_after_s = await _one(
                config, pool, _payload(config, plan, pool, index), index, clock() - origin, origin, keep
            )
            failures = 0 if ok else failures + 1
            wait_s = min(pause_s(consecutive_failures=failures, retry_after_s=retry_after_s), end - clock())
            if wait_s > 0 and not brakes.stopped:
                await asyncio.sleep(wait_s)

    await asyncio.gather(*(worker() for _ in range(workers)))

"""GuideLLM's sweep (``bench serve --profile sweep --rate N``): find the rates worth measuring, then
measure them.

GuideLLM's ``SweepProfile`` (https://github.com/vllm-project/guidellm,
``src/guidellm/benchmark/profiles/sweep.py``) runs ``N`` benchmarks: a *synchronous* one (one request
at a time), a *throughput* one (as many at once as allowed: the saturation rate), then ``N − 2`` at
rates evenly spaced from the synchronous rate to the throughput rate, ``linspace(low, high, N − 1)``
less its first point (so the last level is at the measured saturation rate). Here:

- **synchronous**: a closed loop of one (``--concurrency 1``); its rate is its completed requests/s.
- **throughput**: with ``--num-prompts`` the ``N`` requests all at once (``--request-rate inf``) with
  ``--max-concurrency`` (default :data:`THROUGHPUT_CONCURRENCY`) in flight; without it a closed loop of
  that many for ``--duration``. Its rate is its *completed* requests per second of its window.
- **rate levels**: ordinary open-loop runs at each rate (``--arrival``, ``--max-concurrency`` kept).

Every level is an ordinary stored run (its own ``run_id``) made by the ``run`` given, and carries the
metadata ``sweep`` (an id shared by the levels) and ``sweep_level`` (``synchronous``, ``throughput``,
``rate K/M``), so ``results list`` shows which runs belong together and ``results report`` draws the
rate levels as one curve (they differ only in their load).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.core.errors import BenchmarkError

Runner = Callable[[LoadConfig], BenchSummary]
Strategy = Literal["synchronous", "throughput", "rate"]
DEFAULT_SWEEP_SIZE = 10
"""Benchmarks of a sweep without ``--rate``: GuideLLM's ``default_sweep_number``
(``src/guidellm/settings.py``, https://github.com/vllm-project/guidellm)."""
MIN_SWEEP_SIZE = 3
"""The synchronous and throughput levels and at least one rate between (GuideLLM accepts 2, which
measures no rate at all)."""
MAX_SWEEP_SIZE = 100
"""Sanity cap on the levels (each is a whole run)."""
THROUGHPUT_CONCURRENCY = 512
"""Requests in flight of the throughput level without ``--max-concurrency``: GuideLLM's
``max_concurrency`` setting (``src/guidellm/settings.py``), the cap of its throughput strategy."""


class SweepLevel(BaseModel):
    """One level of the sweep: its strategy, its target rate (rate levels) and its run's summary."""

    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    level: str
    strategy: Strategy
    rate_rps: float | None
    completed_rate_rps: float
    summary: BenchSummary


class SweepResult(BaseModel):
    """The sweep: the measured synchronous and saturation rates, the rates between, every level."""

    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    sweep_id: str
    size: int
    synchronous_rate_rps: float
    saturation_rate_rps: float
    rates_rps: list[float]
    levels: list[SweepLevel]


def completed_rate_rps(summary: BenchSummary) -> float:
    """Completed requests per second of the run's window (GuideLLM's successful request rate): a closed
    loop's achieved rate already counts completions; an open loop's counts sends."""
    if summary.mode == "concurrency":
        return summary.achieved_rate_rps
    return summary.achieved_rate_rps * summary.requests_completed / max(summary.requests_sent, 1)


def rates_between(low_rps: float, high_rps: float, size: int) -> list[float]:
    """The ``size − 2`` rates of the rate levels: ``linspace(low, high, size − 1)`` less ``low`` itself."""
    steps = size - 2
    return [low_rps + (high_rps - low_rps) * k / steps for k in range(1, steps + 1)]


def _level(config: LoadConfig, sweep_id: str, name: str, **load: object) -> LoadConfig:
    """``config`` with the level's load (every other load key cleared) and the sweep's metadata."""
    cleared: dict[str, object] = {
        "rate_rps": None,
        "concurrency": None,
        "all_at_once": False,
        "trace_path": None,
    }
    metadata = dict(config.metadata) | {"sweep": sweep_id, "sweep_level": name}
    return config.model_copy(update=cleared | load | {"metadata": metadata})


def synchronous(config: LoadConfig, sweep_id: str) -> LoadConfig:
    """One request at a time (a closed loop of one)."""
    return _level(config, sweep_id, "synchronous", concurrency=1, max_concurrency=None)


def throughput(config: LoadConfig, sweep_id: str) -> LoadConfig:
    """As many requests in flight as allowed (see the module doc)."""
    cap = config.max_concurrency or THROUGHPUT_CONCURRENCY
    if config.num_prompts is not None:
        return _level(config, sweep_id, "throughput", all_at_once=True, max_concurrency=cap, warmup_s=0.0)
    return _level(config, sweep_id, "throughput", concurrency=cap, max_concurrency=None)


def _measured(name: str, strategy: Strategy, rate_rps: float | None, summary: BenchSummary) -> SweepLevel:
    return SweepLevel(
        level=name,
        strategy=strategy,
        rate_rps=rate_rps,
        completed_rate_rps=completed_rate_rps(summary),
        summary=summary,
    )


def profile_sweep(config: LoadConfig, run: Runner, size: int = DEFAULT_SWEEP_SIZE) -> SweepResult:
    """The sweep of ``size`` levels (see the module doc); a throughput level that completed nothing
    stops it (no rate to sweep to)."""
    if not MIN_SWEEP_SIZE <= size <= MAX_SWEEP_SIZE:
        raise ValueError(f"a sweep has {MIN_SWEEP_SIZE} to {MAX_SWEEP_SIZE} levels, got {size}")
    sweep_id = uuid.uuid4().hex[:12]
    first = run(synchronous(config, sweep_id))
    second = run(throughput(config, sweep_id))
    low_rps, high_rps = completed_rate_rps(first), completed_rate_rps(second)
    if high_rps <= 0:
        raise BenchmarkError(
            f"the throughput level completed no request (run {second.run_id}): no saturation rate to sweep to",
            hint=f"gpuplan results show {second.run_id}",
        )
    rates = rates_between(low_rps, high_rps, size)
    levels = [
        _measured("synchronous", "synchronous", None, first),
        _measured("throughput", "throughput", None, second),
    ]
    for k, rate in enumerate(rates, start=1):
        name = f"rate {k}/{len(rates)}"
        levels.append(_measured(name, "rate", rate, run(_level(config, sweep_id, name, rate_rps=rate))))
    return SweepResult(
        sweep_id=sweep_id,
        size=size,
        synchronous_rate_rps=low_rps,
        saturation_rate_rps=high_rps,
        rates_rps=rates,
        levels=levels,
    )

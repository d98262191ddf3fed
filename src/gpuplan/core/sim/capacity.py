"""Capacity search: the highest request rate a deployment sustains under P99 SLOs, by bisection.

At each probed rate the simulator runs the same seeded workload (common random numbers, so the
answer moves monotonically with the rate); a rate passes when every measured request completed, the
P99s meet the SLO, and the deployment kept up (departures over the last requests at least
``KEEP_UP_RATIO`` of the arrival rate — an overloaded queue grows without bound even when the SLO
names only TPOT, which queueing does not stretch).

A finite run can hide overload: with a few thousand requests the backlog may not yet have pushed
P99 TTFT over its limit. So the bracket's top is the simulated saturation rate (all requests
available at once, the engine's own maximum in steady state), and no rate above it is ever accepted.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import SimResult, replica_limits, simulate
from gpuplan.core.sim.workload import ArrivalSpec, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

BISECTION_STEPS = 12
"""2^-12 of the bracket: well below the run-to-run noise of a few thousand simulated requests."""
UPPER_BOUND_FACTOR = 1.5
"""Bracket top: 1.5× the analytic offline throughput (perf/scenarios.py), which no load exceeds."""
KEEP_UP_RATIO = 0.95
"""A stable queue completes requests as fast as they arrive, within sampling noise."""
KEEP_UP_MIN_REQUESTS = 100
"""Below this many measured requests the departure rate is too noisy (±10 %) to judge keeping up."""
PROBE_RATE_FRACTION = 1e-3
"""The 'rate → 0' probe: one request at a time, the best latency the plan can give."""
SATURATION_BURST_FACTOR = 100.0
"""Arrivals 100× faster than the analytic maximum: effectively all at once."""
SATURATION_WAVES = 20
"""Full batches the saturation run cycles through: with every request arriving at once and equal
lengths the batch refills in waves, and the steady-state rate over 20 of them is within ~2 % of its
limit (4 % at 10 waves, 11 % at 5; Llama-2-70B TP2 on H100, MLPerf lengths)."""
MAX_SATURATION_REQUESTS = 50_000
"""Bound on the saturation run (about 1 s of simulation) for deployments with very large batches."""
NEAR_WIDTH = 0.15
"""Half-width of the narrow bracket around a guess: the tail model's P99s are within ~10 % of the
simulator's (tests/unit/core/sim/test_tail_model.py), which moves the rate by less than that."""
NEAR_MOVES = 3
"""Moves of a misplaced narrow bracket before the full search takes over."""
PROBE_REQUESTS = 20
"""Requests in the rate → 0 probe: alone in the system, each sees the same latency."""


class CapacityResult(FrozenModel):
    """Highest passing rate (whole deployment) and the summary at that rate; ``feasible`` False when
    even the near-zero rate misses the SLO (``reason`` says which limit)."""

    feasible: bool
    rate_rps: float
    reason: str | None
    summary: SimSummary | None
    probes: int


def offline_requests_per_s(replica: ReplicaModel, workload: WorkloadSpec) -> float:
    """The analytic offline maximum of the whole deployment for the workload's mean lengths."""
    mean = Workload(
        scenario="offline",
        input_tokens=max(round(workload.input_tokens.mean_tokens), 0),
        output_tokens=max(round(workload.output_tokens.mean_tokens), 1),
    )
    _, _, tokens_per_s, _ = replica.run(mean)
    return tokens_per_s * replica.step.layout.replicas / mean.output_tokens


def saturation_requests_per_s(replica: ReplicaModel, workload: WorkloadSpec, config: SimConfig) -> float:
    """Steady-state completion rate of the simulated engine under a standing backlog (every request
    available at once), whole deployment.

    Measured as decoded tokens per second over the steps that run while requests still wait (from the
    first completion to the last admission), divided by the decode tokens of a mean request (output − 1; the first
    token comes out of prefill). A finite burst's completions/wall-time would count the first
    wave's prefill and the final drain, when the batch empties without refill, and read low.
    """
    burst = SATURATION_BURST_FACTOR * offline_requests_per_s(replica, workload)
    arrival = ArrivalSpec(kind="poisson", rate_rps=burst)
    waves = SATURATION_WAVES * _batch_requests(replica, workload, config)
    requests = max(workload.num_requests, min(waves, MAX_SATURATION_REQUESTS))
    spec = workload.model_copy(update={"arrival": arrival, "num_requests": requests})
    result = simulate(replica, generate(spec), config.model_copy(update={"record_timeline": True}))
    decode_tokens = workload.output_tokens.mean_tokens - 1.0
    rate = _backlogged_decode_tokens_per_s(result) / decode_tokens if decode_tokens >= 1.0 else 0.0
    if rate > 0.0:
        return rate
    return summarise(result, warmup_fraction=config.warmup_fraction).requests_per_s


def _batch_requests(replica: ReplicaModel, workload: WorkloadSpec, config: SimConfig) -> int:
    """Requests the deployment holds at once: KV pool over a mean request's context, capped by max seqs."""
    limits = replica_limits(replica, config)
    context = workload.input_tokens.mean_tokens + workload.output_tokens.mean_tokens
    per_replica = min(limits.max_seqs, limits.kv_tokens / max(context, 1.0))
    return math.ceil(per_replica) * replica.step.layout.replicas


def _backlogged_decode_tokens_per_s(result: SimResult) -> float:
    """Σ over replicas of decoded tokens / step time, over the steps between the first completion and
    the last admission (until then some request is still waiting, whichever pool holds it)."""
    finished = result.finish_s[np.isfinite(result.finish_s)]
    admitted = result.scheduled_s[np.isfinite(result.scheduled_s)]
    if not finished.size or not admitted.size:
        return 0.0
    first, last = float(finished.min()), float(admitted.max())
    total = 0.0
    for timeline in result.timelines:
        ends = np.asarray(timeline.t_s, dtype=np.float64)
        keep = (ends > first) & (ends <= last)
        busy_s = float(np.asarray(timeline.dt_s, dtype=np.float64)[keep].sum())
        if busy_s > 0.0:
            total += float(np.asarray(timeline.decode, dtype=np.float64)[keep].sum()) / busy_s
    return total


def violation(summary: SimSummary, slo: Sla, offered_rps: float) -> str | None:
    """Why a run fails the SLO's P99 limits (None when it passes; mean limits are not checked here).
    Keeping up is judged against the rate the seeded sample actually realised (a short or bursty
    sample can arrive well below the nominal rate)."""
    if summary.truncated:
        return summary.truncated
    if summary.rejected:
        return f"{summary.rejected} requests rejected: longer than max_model_len or than the whole KV pool"
    if summary.completed < summary.requests:
        return f"{summary.requests - summary.completed} requests did not complete"
    checks = (
        ("TTFT", summary.ttft.p99_ms, slo.ttft_p99_ms),
        ("TPOT", summary.tpot.p99_ms, slo.tpot_p99_ms),
        ("E2E", summary.e2e.p99_ms, slo.e2e_p99_ms),
    )
    for name, value, limit in checks:
        if limit is not None and value is not None and value > limit:
            return f"P99 {name} {value:,.0f} ms > {limit:,.0f} ms"
    arrived_rps = min(offered_rps, summary.arrival_rate_rps or offered_rps)
    if (
        summary.measured >= KEEP_UP_MIN_REQUESTS
        and summary.requests_per_s < KEEP_UP_RATIO * arrived_rps * _drain_share(summary)
    ):
        return f"throughput {summary.requests_per_s:.2f} req/s falls behind {arrived_rps:.2f} req/s arriving"
    return None


def _drain_share(summary: SimSummary) -> float:
    """Share of the measured window that is arrivals rather than the final drain (E2E mean)."""
    e2e_s = (summary.e2e.mean_ms or 0.0) / 1000.0
    span = summary.measured / max(summary.arrival_rate_rps, 1e-12)
    return span / (span + e2e_s) if span > 0 else 1.0


def max_rate_under_slo(
    replica: ReplicaModel,
    workload: WorkloadSpec,
    slo: Sla,
    config: SimConfig | None = None,
    *,
    steps: int = BISECTION_STEPS,
    near_rps: float | None = None,
    near_width: float = NEAR_WIDTH,
) -> CapacityResult:
    """Bisect the Poisson/gamma arrival rate of ``workload`` (its arrival rate is replaced).

    Full search (``near_rps`` None): a rate → 0 probe, then ``steps`` halvings of [0, saturation rate].

    Narrow search (``near_rps`` given, e.g. ``core/sim/tail_model.py tail_max_rate``): the bracket is
    ``near_rps``·(1 ± ``near_width``), each end checked by a run and moved out by the bracket's ratio
    while it is wrong (at most ``NEAR_MOVES`` times each; then the full search runs), then ``steps``
    halvings inside it; no saturation run and no rate → 0 probe, so ~``steps`` + 2 runs instead of
    ``steps`` + 2 plus a saturation run of up to 50,000 requests. The saturation run still caps the
    bracket when it reaches the analytic offline maximum (an 800-request run can hide overload).
    """
    config = config or SimConfig(record_timeline=False)
    if workload.arrival.kind not in ("poisson", "gamma"):
        workload = workload.model_copy(update={"arrival": ArrivalSpec(kind="poisson", rate_rps=1.0)})

    def run(rate: float, requests: int = workload.num_requests) -> tuple[SimSummary, str | None]:
        arrival = workload.arrival.model_copy(update={"rate_rps": rate})
        spec = workload.model_copy(update={"arrival": arrival, "num_requests": requests})
        summary = summarise(
            simulate(replica, generate(spec), config),
            slo=slo,
            warmup_fraction=config.warmup_fraction,
        )
        return summary, violation(summary, slo, rate)

    offline = offline_requests_per_s(replica, workload)
    tops: list[float] = []

    def top() -> float:  # the saturation run is long: only when a rate reaches the analytic maximum
        if not tops:
            tops.append(
                min(UPPER_BOUND_FACTOR * offline, saturation_requests_per_s(replica, workload, config))
            )
        return tops[0]

    if near_rps is not None and near_rps > 0:
        found = _near_search(run, near_rps, near_width, lambda r: r if r <= offline else min(r, top()), steps)
        if found is not None:
            return found
    return _full_search(run, top(), min(workload.num_requests, PROBE_REQUESTS), steps)


_Run = Callable[..., tuple[SimSummary, str | None]]


def _full_search(run: _Run, top: float, probe_requests: int, steps: int) -> CapacityResult:
    low_rate = PROBE_RATE_FRACTION * top
    best, why = run(low_rate, probe_requests)
    if why is not None:
        return CapacityResult(
            feasible=False,
            rate_rps=0.0,
            reason=f"infeasible even at rate -> 0: {why}",
            summary=best,
            probes=1,
        )
    lo, _, best = _bisect(run, low_rate, top, best, steps)
    return CapacityResult(feasible=True, rate_rps=lo, reason=None, summary=best, probes=steps + 1)


def _bisect(run: _Run, lo: float, hi: float, best: SimSummary, steps: int) -> tuple[float, float, SimSummary]:
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        summary, why = run(mid)
        if why is None:
            lo, best = mid, summary
        else:
            hi = mid
    return lo, hi, best


def _near_search(
    run: _Run, near: float, width: float, cap: Callable[[float], float], steps: int
) -> CapacityResult | None:
    """The narrow search of ``max_rate_under_slo``; None when the bracket cannot be placed. ``cap``
    clips a rate to the highest one the search may accept."""
    ratio = (1.0 + width) / (1.0 - width)
    lo, hi = cap(near * (1.0 - width)), cap(near * (1.0 + width))
    if lo >= hi:
        lo = hi / ratio
    probes = 0
    best, why = run(lo)
    probes += 1
    moves = 0
    while why is not None:  # the guess was high: move the bracket down
        if moves >= NEAR_MOVES:
            return None
        hi, lo, moves = lo, lo / ratio, moves + 1
        best, why = run(lo)
        probes += 1
    moves = 0
    high, why = run(hi)
    probes += 1
    while why is None:  # the guess was low: move the bracket up, never past the cap
        if moves >= NEAR_MOVES or cap(hi * ratio) <= hi:
            return None
        lo, best, hi, moves = hi, high, cap(hi * ratio), moves + 1
        high, why = run(hi)
        probes += 1
    lo, hi, best = _bisect(run, lo, hi, best, steps)
    return CapacityResult(feasible=True, rate_rps=lo, reason=None, summary=best, probes=probes + steps)

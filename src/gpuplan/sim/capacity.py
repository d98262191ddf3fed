"""Capacity search: the highest request rate a deployment sustains under P99 SLOs, by bisection.

At each probed rate the simulator runs the same seeded workload (common random numbers, so the
answer moves monotonically with the rate); a rate passes when every measured request completed, the
P99s meet the SLO, and the deployment kept up (departures over the last requests at least
``KEEP_UP_RATIO`` of the arrival rate — an overloaded queue grows without bound even when the SLO
names only TPOT, which queueing does not stretch).

A finite run can hide overload: with a few thousand requests the backlog may not yet have pushed
P99 TTFT over its limit. So the bracket's top is the simulated saturation rate (all requests
available at once, the engine's own maximum), and no rate above it is ever accepted.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuplan.perf.inference import InferenceWorkload, ReplicaModel
from gpuplan.sim.config import SimConfig, Slo
from gpuplan.sim.metrics import SimSummary, summarise
from gpuplan.sim.simulator import simulate
from gpuplan.sim.workload import ArrivalSpec, WorkloadSpec, generate

BISECTION_STEPS = 12
"""2^-12 of the bracket: well below the run-to-run noise of a few thousand simulated requests."""
UPPER_BOUND_FACTOR = 1.5
"""Bracket top: 1.5× the analytic offline throughput (perf/inference.py), which no load exceeds."""
KEEP_UP_RATIO = 0.95
"""A stable queue completes requests as fast as they arrive, within sampling noise."""
KEEP_UP_MIN_REQUESTS = 100
"""Below this many measured requests the departure rate is too noisy (±10 %) to judge keeping up."""
PROBE_RATE_FRACTION = 1e-3
"""The 'rate → 0' probe: one request at a time, the best latency the plan can give."""
SATURATION_BURST_FACTOR = 100.0
"""Arrivals 100× faster than the analytic maximum: effectively all at once."""
PROBE_REQUESTS = 20
"""Requests in the rate → 0 probe: alone in the system, each sees the same latency."""


class CapacityResult(BaseModel):
    """Highest passing rate (whole deployment) and the summary at that rate; ``feasible`` False when
    even the near-zero rate misses the SLO (``reason`` says which limit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feasible: bool
    rate_rps: float
    reason: str | None
    summary: SimSummary | None
    probes: int


def offline_requests_per_s(replica: ReplicaModel, workload: WorkloadSpec) -> float:
    """The analytic offline maximum of the whole deployment for the workload's mean lengths."""
    mean = InferenceWorkload(
        scenario="offline",
        input_tokens=max(round(workload.input_tokens.mean_tokens), 0),
        output_tokens=max(round(workload.output_tokens.mean_tokens), 1),
    )
    _, _, tokens_per_s, _ = replica.run(mean)
    return tokens_per_s * replica.step.layout.replicas / mean.output_tokens


def saturation_requests_per_s(replica: ReplicaModel, workload: WorkloadSpec, config: SimConfig) -> float:
    """Completion rate of the simulated engine when every request is available at once (offline)."""
    burst = SATURATION_BURST_FACTOR * offline_requests_per_s(replica, workload)
    arrival = ArrivalSpec(kind="poisson", rate_rps=burst)
    spec = workload.model_copy(update={"arrival": arrival})
    summary = summarise(simulate(replica, generate(spec), config), warmup_fraction=config.warmup_fraction)
    return summary.requests_per_s


def violation(summary: SimSummary, slo: Slo, offered_rps: float) -> str | None:
    """Why a run fails the SLO (None when it passes)."""
    if summary.truncated:
        return summary.truncated
    if summary.completed < summary.requests - summary.rejected or summary.rejected:
        return f"{summary.requests - summary.completed} requests did not complete"
    checks = (
        ("TTFT", summary.ttft.p99_ms, slo.ttft_p99_ms),
        ("TPOT", summary.tpot.p99_ms, slo.tpot_p99_ms),
        ("E2E", summary.e2e.p99_ms, slo.e2e_p99_ms),
    )
    for name, value, limit in checks:
        if limit is not None and value is not None and value > limit:
            return f"P99 {name} {value:,.0f} ms > {limit:,.0f} ms"
    if (
        summary.measured >= KEEP_UP_MIN_REQUESTS
        and summary.requests_per_s < KEEP_UP_RATIO * offered_rps * _drain_share(summary)
    ):
        return f"throughput {summary.requests_per_s:.2f} req/s falls behind {offered_rps:.2f} req/s offered"
    return None


def _drain_share(summary: SimSummary) -> float:
    """Share of the measured window that is arrivals rather than the final drain (E2E mean)."""
    e2e_s = (summary.e2e.mean_ms or 0.0) / 1000.0
    span = summary.measured / max(summary.arrival_rate_rps, 1e-12)
    return span / (span + e2e_s) if span > 0 else 1.0


def max_rate_under_slo(
    replica: ReplicaModel,
    workload: WorkloadSpec,
    slo: Slo,
    config: SimConfig | None = None,
    *,
    steps: int = BISECTION_STEPS,
) -> CapacityResult:
    """Bisect the Poisson/gamma arrival rate of ``workload`` (its arrival rate is replaced)."""
    config = config or SimConfig(record_timeline=False)
    if workload.arrival.kind not in ("poisson", "gamma"):
        workload = workload.model_copy(update={"arrival": ArrivalSpec(kind="poisson", rate_rps=1.0)})
    top = min(
        UPPER_BOUND_FACTOR * offline_requests_per_s(replica, workload),
        saturation_requests_per_s(replica, workload, config),
    )

    def run(rate: float, requests: int = workload.num_requests) -> tuple[SimSummary, str | None]:
        arrival = workload.arrival.model_copy(update={"rate_rps": rate})
        spec = workload.model_copy(update={"arrival": arrival, "num_requests": requests})
        summary = summarise(
            simulate(replica, generate(spec), config),
            slo=slo,
            warmup_fraction=config.warmup_fraction,
        )
        return summary, violation(summary, slo, rate)

    low_rate = PROBE_RATE_FRACTION * top
    best, why = run(low_rate, min(workload.num_requests, PROBE_REQUESTS))
    if why is not None:
        return CapacityResult(
            feasible=False,
            rate_rps=0.0,
            reason=f"infeasible even at rate -> 0: {why}",
            summary=best,
            probes=1,
        )
    lo, hi = low_rate, top
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        summary, why = run(mid)
        if why is None:
            lo, best = mid, summary
        else:
            hi = mid
    return CapacityResult(feasible=True, rate_rps=lo, reason=None, summary=best, probes=steps + 1)

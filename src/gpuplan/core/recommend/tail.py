"""Size plans on P99 latency with the serving simulator instead of steady-state means.

A mean TTFT says nothing about the slowest 1 % of requests: queueing behind bursts of Poisson
arrivals stretches the tail long before the mean moves. When the SLA names P99 limits, each of the
best analytic plans of a GPU type is re-sized: the highest Poisson rate one replica sustains with
its simulated P99 TTFT/TPOT inside the limits (``core.sim.capacity.max_rate_under_slo``, bisection over
the simulator) sets ``replicas = ⌈target rate / that rate⌉``, and the plan is re-priced. P99 sizing
replaces the analytic headroom (the simulated tail is what the headroom stood in for); mean limits,
when also given, still hold because a plan never shrinks below its analytic size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.request import GpuOffer, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.search import (
    COUNT_MISS,
    LATENCY_MISS,
    Miss,
    count_miss,
    one_replica,
    plan_for,
    rank,
)
from gpuplan.core.sim.capacity import max_rate_under_slo
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import Progress, simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

PLANS_PER_GPU = 2
"""Analytic plans of each GPU type re-sized by simulation: the cheapest two cover the usual
trade-off (fewer large replicas vs more small ones) at a bounded cost of simulation."""
TAIL_REQUESTS = 800
"""Requests per simulated probe: several E2E times of arrivals, a stable P99 (8 requests above it)."""
TAIL_STEPS = 8
"""Bisection steps: 2^-8 of the bracket, below the P99's own sampling noise at 800 requests."""
WARMUP_FRACTION = 0.2
"""Drop the filling phase of each run: the SLA is about steady state."""
SEED = 7
"""Fixed seed: every probe of every plan sees the same arrivals (common random numbers), so plans
compare on the engine, not on luck, and a recommend is reproducible."""


def size_on_p99(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    plans: Sequence[Plan],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    progress: Progress | None = None,
) -> tuple[list[Plan], dict[str, list[Miss]]]:
    """The best analytic plans of each GPU type, re-sized and re-priced on simulated P99s;
    ``progress`` receives the share of plans done."""
    if target.rate_rps is None:
        raise UserInputError(
            "P99 limits are sized with the serving simulator at a request rate",
            hint="give --rate (requests/s) instead of --concurrency, or use mean limits (--ttft-ms/--tpot-ms)",
        )
    by_gpu = {o.gpu.id: o for o in offers}
    sized: list[Plan] = []
    misses: dict[str, list[Miss]] = {}
    shortlist, dropped = _shortlist(plans, space.p99_gpu_types)
    for gpu, cheapest in dropped.items():
        reason = (
            f"cheapest analytic plan {cheapest.layout.num_gpus}x{gpu} ranks below the {space.p99_gpu_types} GPU types "
            "re-sized on simulated P99s; name it with --gpus to size it"
        )
        misses.setdefault(gpu, []).append(Miss(Rejection(gpu=gpu, kind="cost", reason=reason), COUNT_MISS))
    for done, plan in enumerate(shortlist, start=1):
        result = _resize(model, by_gpu[plan.gpu], plan, target, sla, space, cal)
        if isinstance(result, Plan):
            sized.append(result)
        else:
            misses.setdefault(plan.gpu, []).append(result)
        if progress is not None:
            progress(done / len(shortlist))
    return sized, misses


def _shortlist(plans: Sequence[Plan], gpu_types: int) -> tuple[list[Plan], dict[str, Plan]]:
    """The ``PLANS_PER_GPU`` cheapest analytic plans of the ``gpu_types`` cheapest GPU types, and the
    cheapest plan of each GPU type left out."""
    kept: dict[str, list[Plan]] = {}
    dropped: dict[str, Plan] = {}
    for plan in rank(plans, "cost"):
        if plan.gpu not in kept and len(kept) >= gpu_types:
            dropped.setdefault(plan.gpu, plan)
            continue
        chosen = kept.setdefault(plan.gpu, [])
        if len(chosen) < PLANS_PER_GPU:
            chosen.append(plan)
    return [p for chosen in kept.values() for p in chosen], dropped


def _spec(target: Workload, rate_rps: float) -> WorkloadSpec:
    return WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=rate_rps),
        input_tokens=LengthDist(kind="fixed", value=target.input_tokens),
        output_tokens=LengthDist(kind="fixed", value=target.output_tokens),
        num_requests=TAIL_REQUESTS,
        seed=SEED,
    )


def _replica_of(
    model: ModelSpec, offer: GpuOffer, plan: Plan, target: Workload, cal: Calibration
) -> ReplicaModel | Miss:
    """One replica of the plan's layout (the simulator runs it alone), or a memory miss when it does
    not build."""
    try:
        return one_replica(model, offer.gpu, plan.layout, target, cal)
    except GpuplanError as exc:
        return Miss(Rejection(gpu=plan.gpu, kind="memory", reason=exc.message), LATENCY_MISS)


def _resize(
    model: ModelSpec,
    offer: GpuOffer,
    plan: Plan,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> Plan | Miss:
    """The plan with its replicas re-sized on simulated P99s and re-priced, or why it cannot be."""
    replica = _replica_of(model, offer, plan, target, cal)
    if isinstance(replica, Miss):
        return replica
    config = SimConfig(record_timeline=False, warmup_fraction=WARMUP_FRACTION)
    found = max_rate_under_slo(replica, _spec(target, 1.0), sla, config, steps=TAIL_STEPS)
    layout = plan.layout
    label = layout.replica_label
    if not found.feasible or found.rate_rps <= 0:
        reason = (found.reason or "P99 limits missed").replace("infeasible even at rate -> 0: ", "")
        return Miss(
            Rejection(
                gpu=plan.gpu, kind="latency", reason=f"{reason} even at a trickle of requests ({label})"
            ),
            LATENCY_MISS,
        )
    rate = target.rate_rps or 0.0
    replicas = max(math.ceil(rate / found.rate_rps), 1)
    if sla.has_means:
        replicas = max(replicas, layout.replicas)
    count = replicas * layout.gpus_per_replica
    if count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {label}, {found.rate_rps:.2f} req/s each"
        return count_miss(plan.gpu, what, count, space.max_gpus)
    sized = plan_for(replica, offer, layout.with_replicas(replicas), target, cal)
    tail = summarise(
        simulate(replica, generate(_spec(target, rate / replicas)), config), warmup_fraction=WARMUP_FRACTION
    )
    return sized.model_copy(
        update={
            "ttft_p99_ms": tail.ttft.p99_ms,
            "tpot_p99_ms": tail.tpot.p99_ms,
            "p99_capacity_rps_per_replica": found.rate_rps,
            "sized_on": "p99",
        }
    )

"""Size plans on P99 latency: every GPU type × layout with the tail model, the finalists with the simulator.

A mean TTFT says nothing about the slowest 1 % of requests: queueing behind bursts of Poisson
arrivals stretches the tail long before the mean moves. When the SLA names P99 limits, every analytic
plan (every GPU type × layout the search kept) is re-sized on the analytic tail model
(``core/sim/tail_model.py tail_max_rate``: the highest Poisson rate one replica sustains with its
predicted P99s inside the limits) — microseconds a plan, so nothing is left out. Then the
``FINALISTS`` best plans (the best of each of the leading GPU types, in the objective's order) are
confirmed with the serving simulator: ``core/sim/capacity.py max_rate_under_slo(near_rps=...)`` bisects
in a narrow bracket around the tail model's rate, and a run at the plan's per-replica rate gives the
reported P99s. A confirmed plan that gets dearer is re-ranked and the next one confirmed, up to
``MAX_CONFIRMED``. Each plan's ``replicas = ⌈target rate / per-replica rate⌉`` and it is re-priced;
plans not confirmed carry the tail model's P99s (the assumptions say so). P99 sizing replaces the
analytic headroom (the tail is what the headroom stood in for); mean limits, when also given, still
hold because a plan never shrinks below its analytic size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.request import GpuOffer, Objective, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.search import LATENCY_MISS, Miss, count_miss, one_replica, plan_for, rank
from gpuplan.core.sim.capacity import NEAR_WIDTH, max_rate_under_slo, violation
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import Progress, simulate
from gpuplan.core.sim.tail_model import tail_estimate, tail_max_rate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

FINALISTS = 3
"""Plans confirmed with the simulator: the best of each of the three leading GPU types (the answer and
its two runner-ups), ~6 simulated runs each."""
MAX_CONFIRMED = 4
"""Bound on confirmations when confirmed plans get dearer and fall behind others."""
CONFIRM_STEPS = 3
"""Halvings of the narrow bracket (±15 %): 3.75 % resolution of the per-replica rate."""
BRACKET_RESOLUTION = 2 * NEAR_WIDTH / (1 - NEAR_WIDTH) / 2**CONFIRM_STEPS
"""Relative width of the bracket left after ``CONFIRM_STEPS`` halvings: the true limit lies below
``found × (1 + this)``, so one more run decides a replica count inside it."""
TAIL_REQUESTS = 800
"""Requests per simulated probe: several E2E times of arrivals, a stable P99 (8 requests above it)."""
WARMUP_FRACTION = 0.2
"""Drop the filling phase of each run: the SLA is about steady state."""
SEED = 7
"""Fixed seed: every probe of every plan sees the same arrivals (common random numbers), so plans
compare on the engine, not on luck, and a recommend is reproducible."""
MAX_REPLICA_BUMPS = 2
"""A run at the sized per-replica rate that still misses (sampling noise at the bracket's edge) adds
a replica, at most twice."""


@dataclass(frozen=True)
class _Candidate:
    """A plan sized on P99, the replica it was sized with, and whether the simulator confirmed it."""

    plan: Plan
    replica: ReplicaModel
    offer: GpuOffer
    confirmed: bool = False


def size_on_p99(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    plans: Sequence[Plan],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    progress: Progress | None = None,
    objective: Objective = "cost",
) -> tuple[list[Plan], dict[str, list[Miss]]]:
    """Every analytic plan re-sized on the tail model, the finalists confirmed with the simulator
    (module docstring); ``progress`` receives the share of confirmations done."""
    if target.rate_rps is None:
        raise UserInputError(
            "P99 limits are sized with the serving simulator at a request rate",
            hint="give --rate (requests/s) instead of --concurrency, or use mean limits (--ttft-ms/--tpot-ms)",
        )
    by_gpu = {o.gpu.id: o for o in offers}
    misses: dict[str, list[Miss]] = {}
    pool: list[_Candidate] = []
    for plan in plans:
        result = _tail_size(model, by_gpu[plan.gpu], plan, target, sla, space, cal)
        if isinstance(result, Miss):
            misses.setdefault(plan.gpu, []).append(result)
        else:
            pool.append(result)
    pool = _confirm_finalists(pool, target, sla, space, cal, objective, misses, progress)
    return [c.plan for c in pool], misses


def _leaders(pool: Sequence[_Candidate], objective: Objective) -> list[_Candidate]:
    """The best candidate of each GPU type, in the objective's order."""
    by_plan = {id(c.plan): c for c in pool}
    seen: set[str] = set()
    out: list[_Candidate] = []
    for plan in rank([c.plan for c in pool], objective):
        if plan.gpu not in seen:
            seen.add(plan.gpu)
            out.append(by_plan[id(plan)])
    return out


def _confirm_finalists(
    pool: list[_Candidate],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    objective: Objective,
    misses: dict[str, list[Miss]],
    progress: Progress | None,
) -> list[_Candidate]:
    """Confirm the leaders with the simulator until the ``FINALISTS`` best are all confirmed."""
    done = 0
    while done < MAX_CONFIRMED:
        todo = [c for c in _leaders(pool, objective)[:FINALISTS] if not c.confirmed]
        if not todo:
            break
        pick = todo[0]
        pool.remove(pick)
        result = _confirm(pick, target, sla, space, cal)
        if isinstance(result, Miss):
            misses.setdefault(pick.plan.gpu, []).append(result)
        else:
            pool.append(result)
        done += 1
        if progress is not None:
            progress(min(done / FINALISTS, 1.0))
    if progress is not None and done < FINALISTS:
        progress(1.0)
    return pool


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


def _trickle_miss(gpu: str, reason: str, label: str) -> Miss:
    reason = reason.replace("infeasible even at rate -> 0: ", "")
    return Miss(
        Rejection(gpu=gpu, kind="latency", reason=f"{reason} even at a trickle of requests ({label})"),
        LATENCY_MISS,
    )


def _replicas(plan: Plan, target: Workload, sla: Sla, per_replica_rps: float) -> int:
    replicas = max(math.ceil((target.rate_rps or 0.0) / per_replica_rps), 1)
    return max(replicas, plan.layout.replicas) if sla.has_means else replicas


def _tail_size(
    model: ModelSpec,
    offer: GpuOffer,
    plan: Plan,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> _Candidate | Miss:
    """The plan re-sized and re-priced on the tail model, or why it cannot be."""
    replica = _replica_of(model, offer, plan, target, cal)
    if isinstance(replica, Miss):
        return replica
    shape = {"input_tokens": target.input_tokens, "output_tokens": target.output_tokens}
    rate = tail_max_rate(replica, **shape, slo=sla)
    label = plan.layout.replica_label
    if rate <= 0:
        lone = tail_estimate(replica, **shape, rate_rps=0.0)
        return _trickle_miss(
            plan.gpu, _excess(lone.ttft_p99_ms, lone.tpot_p99_ms, lone.e2e_p99_ms, sla), label
        )
    replicas = _replicas(plan, target, sla, rate)
    count = replicas * plan.layout.gpus_per_replica
    if count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {label}, {rate:.2f} req/s each"
        return count_miss(plan.gpu, what, count, space.max_gpus)
    est = tail_estimate(replica, **shape, rate_rps=(target.rate_rps or 0.0) / replicas)
    sized = plan_for(replica, offer, plan.layout.with_replicas(replicas), target, cal)
    update = {
        "ttft_p99_ms": est.ttft_p99_ms,
        "tpot_p99_ms": est.tpot_p99_ms,
        "p99_capacity_rps_per_replica": rate,
        "sized_on": "p99",
    }
    return _Candidate(sized.model_copy(update=update), replica, offer)


def _excess(ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None, sla: Sla) -> str:
    """Which P99 limit a lone request misses, in the capacity search's words."""
    for name, value, limit in (
        ("TTFT", ttft_ms, sla.ttft_p99_ms),
        ("TPOT", tpot_ms, sla.tpot_p99_ms),
        ("E2E", e2e_ms, sla.e2e_p99_ms),
    ):
        if limit is not None and value is not None and value > limit:
            return f"P99 {name} {value:,.0f} ms > {limit:,.0f} ms"
    return "P99 limits missed"


def _run(replica: ReplicaModel, target: Workload, rate_rps: float, sla: Sla) -> tuple[SimSummary, str | None]:
    config = SimConfig(record_timeline=False, warmup_fraction=WARMUP_FRACTION)
    summary = summarise(
        simulate(replica, generate(_spec(target, rate_rps)), config), slo=sla, warmup_fraction=WARMUP_FRACTION
    )
    return summary, violation(summary, sla, rate_rps)


def _confirm(
    cand: _Candidate, target: Workload, sla: Sla, space: SearchSpace, cal: Calibration
) -> _Candidate | Miss:
    """The candidate re-sized on the simulator's P99s (narrow bracket around the tail model's rate)."""
    plan, replica = cand.plan, cand.replica
    config = SimConfig(record_timeline=False, warmup_fraction=WARMUP_FRACTION)
    guess = plan.p99_capacity_rps_per_replica
    found = max_rate_under_slo(replica, _spec(target, 1.0), sla, config, steps=CONFIRM_STEPS, near_rps=guess)
    label = plan.layout.replica_label
    if not found.feasible or found.rate_rps <= 0:
        return _trickle_miss(plan.gpu, found.reason or "P99 limits missed", label)
    replicas = _replicas(plan, target, sla, found.rate_rps)
    rate = target.rate_rps or 0.0
    fewer = _replicas(plan, target, sla, found.rate_rps * (1.0 + BRACKET_RESOLUTION))
    summary, why = _run(replica, target, rate / min(fewer, replicas), sla)
    if fewer < replicas and why is None:  # the bracket straddled a replica count: the simulator settled it
        replicas = fewer
    elif fewer < replicas:
        summary, why = _run(replica, target, rate / replicas, sla)
    for _ in range(MAX_REPLICA_BUMPS):
        if why is None:
            break
        replicas += 1
        summary, why = _run(replica, target, rate / replicas, sla)
    count = replicas * plan.layout.gpus_per_replica
    if why is not None or count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {label}, {found.rate_rps:.2f} req/s each"
        return count_miss(plan.gpu, what, count, space.max_gpus)
    sized = plan_for(replica, cand.offer, plan.layout.with_replicas(replicas), target, cal)
    update = {
        "ttft_p99_ms": summary.ttft.p99_ms,
        "tpot_p99_ms": summary.tpot.p99_ms,
        "p99_capacity_rps_per_replica": _held_rate(found.rate_rps, rate, replicas),
        "sized_on": "p99",
    }
    return replace(cand, plan=sized.model_copy(update=update), confirmed=True)


def _held_rate(found_rps: float, target_rps: float, replicas: int) -> float:
    """The per-replica rate to report: the search's, moved to the rate the simulator passed at
    ``replicas`` when that settled the count, so that replicas = ⌈target / rate⌉ still holds."""
    if replicas == max(math.ceil(target_rps / found_rps), 1):
        return found_rps
    return target_rps / replicas

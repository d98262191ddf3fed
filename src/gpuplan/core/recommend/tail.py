"""Size plans on P99 latency: every GPU type × layout with the tail model, the finalists with the simulator.

A mean TTFT says nothing about the slowest 1 % of requests: queueing behind bursts of Poisson
arrivals stretches the tail long before the mean moves. When the SLA names P99 limits, every analytic
plan (every GPU type × layout the search kept) is re-sized on the analytic tail model
(``core/sim/tail_model.py tail_max_rate``: the highest Poisson rate one replica sustains with its
predicted P99s inside the limits) — about a millisecond a plan, so nothing is left out. Then the
plans the answer lists (``MAX_PLANS``, in ``best_per_gpu`` order) go to the serving simulator: the
``FINALISTS`` best (the best of each of the leading GPU types, in the objective's order) are confirmed
(``confirm.py``: the fewest replicas whose simulated runs meet the limits, ~2 runs a plan), the other
listed plans checked (one run at the tail model's count, ``confirm.check``); a plan whose count misses
is demoted a replica and re-ranked. A plan that gets dearer is re-ranked and the next one listed
simulated, up to ``MAX_CONFIRMED`` calls. Each plan's ``replicas = ⌈target rate / per-replica rate⌉``
and it is re-priced; plans not simulated (those not listed, or past the bound) carry the tail model's
P99s (``p99_source`` says which). P99 sizing replaces the analytic headroom (the
tail is what the headroom stood in for); mean limits, when also given, still hold because a plan
never shrinks below its analytic size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.confirm import (
    Candidate,
    check,
    confirm,
    mean_floor,
    on_tail_model,
    replicas_for,
    trickle_miss,
    with_exact_capacity,
)
from gpuplan.core.recommend.request import GpuOffer, Objective, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.search import LATENCY_MISS, Miss, count_miss, one_replica, rank
from gpuplan.core.sim.simulator import Progress
from gpuplan.core.sim.tail_model import tail_estimate, tail_max_rate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

MAX_PLANS = 10
"""Plans a recommendation lists (``recommend``); under P99 limits every one of them is simulated."""
FINALISTS = 3
"""Plans confirmed with the simulator at the fewest replicas that pass: the best of each of the three
leading GPU types (the answer and its two runner-ups), ~2 simulated runs each; the other listed plans
are checked at their count (one run)."""
MAX_CONFIRMED = 20
"""Bound on simulator calls (confirmations, checks and demotions, 1-3 runs each) when plans get dearer
on the simulator and fall behind others: the benchmark's cases (benchmarks/README.md) need 10-14 to
end with every listed plan simulated."""


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
) -> tuple[list[Plan], dict[str, list[Miss]], Callable[[Plan], Plan]]:
    """Every analytic plan re-sized on the tail model, the plans listed run on the simulator (module
    docstring); ``progress`` receives the share of simulator calls done. The tail-model capacity
    of each plan is searched only as far as its replica count needs; the returned function gives a
    plan with it to the full resolution (for the plans shown)."""
    if target.rate_rps is None:
        raise UserInputError(
            "P99 limits are sized with the serving simulator at a request rate",
            hint="give --rate (requests/s) instead of --concurrency, or use mean limits (--ttft-ms/--tpot-ms)",
        )
    by_gpu = {o.gpu.id: o for o in offers}
    misses: dict[str, list[Miss]] = {}
    pool: list[Candidate] = []
    for plan in plans:
        result = _tail_size(model, by_gpu[plan.gpu], plan, target, sla, space, cal)
        if isinstance(result, Miss):
            misses.setdefault(plan.gpu, []).append(result)
        else:
            pool.append(result)
    pool = _confirm_listed(pool, target, sla, space, cal, objective, misses, progress)
    by_plan = {id(c.plan): c for c in pool}

    def exact(plan: Plan) -> Plan:
        cand = by_plan.get(id(plan))
        return plan if cand is None else with_exact_capacity(cand, target, sla).plan

    return [c.plan for c in pool], misses, exact


def best_per_gpu(ranked: Sequence[Plan]) -> list[Plan]:
    """The best plan of each GPU type, in rank order, then further layouts of the leaders: the order
    in which ``recommend`` lists the first ``MAX_PLANS``."""
    seen: set[str] = set()
    first: list[Plan] = []
    rest: list[Plan] = []
    for p in ranked:
        (rest if p.gpu_types in seen else first).append(p)
        seen.add(p.gpu_types)
    return first + rest


def _listed(pool: Sequence[Candidate], objective: Objective, space: SearchSpace) -> list[Candidate]:
    """The candidates ``recommend`` would list, in ``best_per_gpu`` order (none over the budget)."""
    by_plan = {id(c.plan): c for c in pool}
    budget = space.max_usd_per_hour
    plans = [
        c.plan
        for c in pool
        if budget is None or (c.plan.usd_per_hour is not None and c.plan.usd_per_hour <= budget)
    ]
    return [by_plan[id(p)] for p in best_per_gpu(rank(plans, objective))[:MAX_PLANS]]


def _confirm_listed(
    pool: list[Candidate],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    objective: Objective,
    misses: dict[str, list[Miss]],
    progress: Progress | None,
) -> list[Candidate]:
    """Simulate the listed plans until every one is: the ``FINALISTS`` leaders confirmed at their
    fewest replicas, the others checked at their count (module docstring)."""
    done = 0
    while done < MAX_CONFIRMED:
        todo = [(i, c) for i, c in enumerate(_listed(pool, objective, space)) if not c.confirmed]
        if not todo:
            break
        place, pick = todo[0]
        pool.remove(pick)
        result = (confirm if place < FINALISTS else check)(pick, target, sla, space, cal)
        if isinstance(result, Miss):
            misses.setdefault(pick.plan.gpu, []).append(result)
        else:
            pool.append(result)
        done += 1
        if progress is not None:
            progress(min(done / MAX_PLANS, 1.0))
    if progress is not None and done < MAX_PLANS:
        progress(1.0)
    return pool


def _replica_of(
    model: ModelSpec, offer: GpuOffer, plan: Plan, target: Workload, cal: Calibration
) -> ReplicaModel | Miss:
    """One replica of the plan's layout (the simulator runs it alone), or a memory miss when it does
    not build."""
    try:
        return one_replica(model, offer.gpu, plan.layout, target, cal)
    except GpuplanError as exc:
        return Miss(Rejection(gpu=plan.gpu, kind="memory", reason=exc.message), LATENCY_MISS)


def _tail_size(
    model: ModelSpec,
    offer: GpuOffer,
    plan: Plan,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> Candidate | Miss:
    """The plan re-sized and re-priced on the tail model, or why it cannot be."""
    replica = _replica_of(model, offer, plan, target, cal)
    if isinstance(replica, Miss):
        return replica

    floor = mean_floor(plan, sla)

    def settled(lo_rps: float, hi_rps: float) -> bool:  # the replica count is known: stop there
        count = replicas_for(target, lo_rps, floor)
        fits = count * plan.layout.gpus_per_replica <= space.max_gpus
        return fits and count == replicas_for(target, hi_rps, floor)

    shape = {"input_tokens": target.input_tokens, "output_tokens": target.output_tokens}
    rate = tail_max_rate(replica, **shape, slo=sla, enough=settled)
    label = plan.layout.replica_label
    if rate <= 0:
        lone = tail_estimate(replica, **shape, rate_rps=0.0)
        return trickle_miss(
            plan.gpu, _excess(lone.ttft_p99_ms, lone.tpot_p99_ms, lone.e2e_p99_ms, sla), label
        )
    replicas = replicas_for(target, rate, floor)
    count = replicas * plan.layout.gpus_per_replica
    if count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {label}, {rate:.2f} req/s each"
        return count_miss(plan.gpu, what, count, space.max_gpus)
    cand = Candidate(plan, replica, offer)
    sized = on_tail_model(cand, replicas, rate, target, cal)
    return Candidate(sized, replica, offer, exact_capacity=False, mean_floor=floor)


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

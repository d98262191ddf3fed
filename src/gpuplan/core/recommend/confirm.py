"""Confirm a P99-sized plan with the serving simulator: the fewest replicas whose runs meet the limits.

A candidate comes from ``tail.py`` sized on the analytic tail model, ``replicas = ⌈target rate / tail
rate⌉``. What the plan needs of the simulator is that count, not the per-replica capacity to 3.75 %:
one run at the plan's share of the target (``TAIL_REQUESTS`` Poisson requests) that meets the P99
limits, and one at a replica fewer that misses them (``_fewest_passing``; fewer still while they
pass). A run that misses at the tail model's count *demotes* the candidate one replica, re-sized on the
tail model, back to the ranking: it is run again only if it still leads (``tail.py``). Far from the
tail model's count (more than ``MAX_REPLICA_MOVES`` either way) the rate search takes over
(``core/sim/capacity.py max_rate_under_slo(near_rps=...)``: a bisection in a narrow bracket). As
there, no per-replica rate above the simulated saturation rate passes. ~2 runs a plan against ~7.
``check`` is the one-run form for the listed plans below the finalists: a run at the count, no search
for fewer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.request import GpuOffer, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.search import LATENCY_MISS, Miss, count_miss, plan_for
from gpuplan.core.sim.capacity import (
    NEAR_WIDTH,
    UPPER_BOUND_FACTOR,
    max_rate_under_slo,
    offline_requests_per_s,
    saturation_requests_per_s,
    violation,
)
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.tail_model import tail_estimate, tail_max_rate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

MAX_REPLICA_MOVES = 3
"""Replica counts the simulator walks from the tail model's before the rate search takes over: the
tail model's P99s are within ~10 % of the simulator's (its rate closer still) below ~0.9 of the offline
rate and up to ~2x off past it, where a run's own P99 moves 10-20 % with the seed: one replica either
way below ~4 replicas, three at ~12."""
CONFIRM_STEPS = 3
"""Halvings of the narrow bracket (±15 %) in the rate search: 3.75 % resolution of the per-replica rate."""
BRACKET_RESOLUTION = 2 * NEAR_WIDTH / (1 - NEAR_WIDTH) / 2**CONFIRM_STEPS
"""Relative width of the bracket left after ``CONFIRM_STEPS`` halvings: the true limit lies below
``found × (1 + this)``, so one more run decides a replica count inside it."""
TAIL_REQUESTS = 800
"""Requests per simulated probe: several E2E times of arrivals, a stable P99 (8 requests above it)."""
LONG_RUN_UTILISATION = 0.8
"""Above this share of the analytic offline rate a passing probe is run again with
``LONG_TAIL_REQUESTS``: near saturation the queue needs thousands of requests to reach its steady
state. Measured (Llama-3.1-8B fp8, 1x MI300X, 2,048/300 tokens, offline 20.0 req/s, seeds 7-9): P99 TPOT
of 800 / 3,200 / 20,000-request runs 28-37 / 32-35 / 34-52 ms at 18 req/s, 46-55 / 55-59 / 73-99 ms at
20 req/s; at 0.56-0.6 of offline (2x GH200, 4x MI300X tp=2 for 70B) run length moves P99 by <= 10 %."""
LONG_TAIL_REQUESTS = 20_000
"""Requests of the long probe: ~0.5 s of simulation for an 8B replica; P99 over ~160 requests above it."""
WARMUP_FRACTION = 0.2
"""Drop the filling phase of each run: the SLA is about steady state."""
SEED = 7
"""Fixed seed: every probe of every plan sees the same arrivals (common random numbers), so plans
compare on the engine, not on luck, and a recommend is reproducible."""
MAX_REPLICA_BUMPS = 2
"""In the rate search, a run at the sized per-replica rate that still misses (sampling noise at the
bracket's edge) adds a replica, at most twice."""


@dataclass(frozen=True)
class Candidate:
    """A plan sized on P99, the replica it was sized with, whether the simulator confirmed it, and the
    most replicas a simulated run missed the limits at (0: none) with how many demotions led there.
    ``mean_floor``: the fewest replicas the analytic (mean) plan needs when the SLA also has mean
    limits (1 when it has none), which no P99 confirmation goes below. ``exact_capacity`` False
    while the plan's tail-model capacity was searched only as far as its replica count needed
    (``with_exact_capacity``)."""

    plan: Plan
    replica: ReplicaModel
    offer: GpuOffer
    confirmed: bool = False
    misses_at: int = 0
    demotions: int = 0
    exact_capacity: bool = True
    mean_floor: int = 1


def spec(target: Workload, rate_rps: float, requests: int = TAIL_REQUESTS) -> WorkloadSpec:
    """The probe workload: ``requests`` Poisson arrivals at ``rate_rps`` of the target's lengths."""
    return WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=rate_rps),
        input_tokens=LengthDist(kind="fixed", value=target.input_tokens),
        output_tokens=LengthDist(kind="fixed", value=target.output_tokens),
        num_requests=requests,
        seed=SEED,
    )


def sim_config() -> SimConfig:
    return SimConfig(record_timeline=False, warmup_fraction=WARMUP_FRACTION)


def run_at(
    replica: ReplicaModel, target: Workload, rate_rps: float, sla: Sla, requests: int = TAIL_REQUESTS
) -> tuple[SimSummary, str | None]:
    """One probe of one replica at ``rate_rps``: its summary and why it misses the P99 limits (None: it meets them)."""
    summary = summarise(
        simulate(replica, generate(spec(target, rate_rps, requests)), sim_config()),
        slo=sla,
        warmup_fraction=WARMUP_FRACTION,
    )
    return summary, violation(summary, sla, rate_rps)


def steady_run_at(
    replica: ReplicaModel, target: Workload, rate_rps: float, sla: Sla, offline_rps: float
) -> tuple[SimSummary, str | None]:
    """``run_at``, and when it passes above ``LONG_RUN_UTILISATION`` of ``offline_rps``, judged
    again on a ``LONG_TAIL_REQUESTS`` run (a short run there hides the queue's steady state)."""
    summary, why = run_at(replica, target, rate_rps, sla)
    if why is None and rate_rps > LONG_RUN_UTILISATION * offline_rps:
        return run_at(replica, target, rate_rps, sla, LONG_TAIL_REQUESTS)
    return summary, why


def trickle_miss(gpu: str, reason: str, label: str) -> Miss:
    reason = reason.replace("infeasible even at rate -> 0: ", "")
    return Miss(
        Rejection(gpu=gpu, kind="latency", reason=f"{reason} even at a trickle of requests ({label})"),
        LATENCY_MISS,
    )


def on_tail_model(
    cand: Candidate, replicas: int, capacity_rps: float, target: Workload, cal: Calibration
) -> Plan:
    """The candidate's layout at ``replicas``, re-priced, with the tail model's P99s at its share of the target."""
    rate = target.rate_rps or 0.0
    shape = {"input_tokens": target.input_tokens, "output_tokens": target.output_tokens}
    est = tail_estimate(cand.replica, **shape, rate_rps=rate / replicas)
    sized = plan_for(cand.replica, cand.offer, cand.plan.layout.with_replicas(replicas), target, cal)
    update = {
        "ttft_p99_ms": est.ttft_p99_ms,
        "tpot_p99_ms": est.tpot_p99_ms,
        "p99_capacity_rps_per_replica": capacity_rps,
        "sized_on": "p99",
        "p99_source": "tail model",
    }
    return sized.model_copy(update=update)


def with_exact_capacity(cand: Candidate, target: Workload, sla: Sla) -> Candidate:
    """The candidate with its tail-model capacity searched to the full resolution (same replica count)."""
    if cand.exact_capacity:
        return cand
    rate = tail_max_rate(
        cand.replica, input_tokens=target.input_tokens, output_tokens=target.output_tokens, slo=sla
    )
    plan = cand.plan.model_copy(update={"p99_capacity_rps_per_replica": rate})
    return replace(cand, plan=plan, exact_capacity=True)


def confirm(
    cand: Candidate, target: Workload, sla: Sla, space: SearchSpace, cal: Calibration
) -> Candidate | Miss:
    """The candidate confirmed on the simulator at the fewest replicas whose run passes, searched
    down from its count (``_fewest_passing``), or demoted one replica when its count misses (module
    docstring); the rate search when the count is further off."""
    cand = with_exact_capacity(cand, target, sla)
    plan = cand.plan
    if cand.demotions >= MAX_REPLICA_MOVES:
        return _confirm_by_rate(cand, target, sla, space, cal)
    judge = _judge(cand.replica, target, sla)
    start = max(plan.layout.replicas, cand.misses_at + 1)
    first = judge(start)
    if isinstance(first, str):
        return _demote(cand, start, first, target, space, cal)
    floor = max(cand.mean_floor, cand.misses_at + 1)
    settled = _fewest_passing(judge, start, first, floor)
    if settled is None:
        return _confirm_by_rate(cand, target, sla, space, cal)
    replicas, summary, missed_below = settled
    rate = target.rate_rps or 0.0
    missed_below = missed_below or (replicas > 1 and cand.misses_at == replicas - 1)
    upper = rate / (replicas - 1) if missed_below else math.inf
    tail_rps = plan.p99_capacity_rps_per_replica or 0.0
    held = tail_rps if rate / replicas <= tail_rps < upper else rate / replicas
    return _confirmed(cand, replicas, summary, held, target, cal)


def check(
    cand: Candidate, target: Workload, sla: Sla, space: SearchSpace, cal: Calibration
) -> Candidate | Miss:
    """The candidate on one simulated run at its replica count: confirmed with that run's P99s when it
    meets the limits (no fewer replicas are tried), else demoted one replica (``_demote``); the rate
    search once demoted ``MAX_REPLICA_MOVES`` times. For the listed plans below the finalists (``tail.py``)."""
    cand = with_exact_capacity(cand, target, sla)
    if cand.demotions >= MAX_REPLICA_MOVES:
        return _confirm_by_rate(cand, target, sla, space, cal)
    replicas = max(cand.plan.layout.replicas, cand.misses_at + 1)
    summary = _judge(cand.replica, target, sla)(replicas)
    if isinstance(summary, str):
        return _demote(cand, replicas, summary, target, space, cal)
    rate = target.rate_rps or 0.0
    upper = rate / (replicas - 1) if replicas > 1 and cand.misses_at == replicas - 1 else math.inf
    tail_rps = cand.plan.p99_capacity_rps_per_replica or 0.0
    held = tail_rps if rate / replicas <= tail_rps < upper else rate / replicas
    return _confirmed(cand, replicas, summary, held, target, cal)


def _judge(replica: ReplicaModel, target: Workload, sla: Sla) -> Callable[[int], SimSummary | str]:
    """A run of one replica at its share of the target rate among ``replicas``: the summary when it
    meets the P99 limits, else why not. No rate above the simulated saturation rate passes (an
    800-request run can hide overload; ``max_rate_under_slo``'s rule); that long run is made only when
    a run passes at a rate past the analytic offline maximum."""
    offline = offline_requests_per_s(replica, spec(target, 1.0))
    tops: list[float] = []

    def judge(replicas: int) -> SimSummary | str:
        rate = (target.rate_rps or 0.0) / replicas
        summary, why = steady_run_at(replica, target, rate, sla, offline)
        if why is None and rate > offline:
            if not tops:
                saturation = saturation_requests_per_s(replica, spec(target, 1.0), sim_config())
                tops.append(min(UPPER_BOUND_FACTOR * offline, saturation))
            if rate > tops[0]:
                why = f"{rate:.2f} req/s per replica is past the simulated saturation rate {tops[0]:.2f}"
        return summary if why is None else why

    return judge


def _fewest_passing(
    judge: Callable[[int], SimSummary | str], start: int, first: SimSummary, floor: int
) -> tuple[int, SimSummary, bool] | None:
    """From ``start`` replicas, whose run passed with ``first``, the fewest (not below ``floor``) whose
    run passes, one count at a time: the count, its run, and whether a replica fewer was run and
    missed. None when still passing ``MAX_REPLICA_MOVES`` counts down (the tail model's count is far off)."""
    replicas, summary = start, first
    for _ in range(MAX_REPLICA_MOVES):
        if replicas - 1 < floor:
            return replicas, summary, False
        fewer = judge(replicas - 1)
        if isinstance(fewer, str):
            return replicas, summary, True
        replicas, summary = replicas - 1, fewer
    return None


def _demote(
    cand: Candidate, missed: int, why: str, target: Workload, space: SearchSpace, cal: Calibration
) -> Candidate | Miss:
    """The candidate one replica above the count its run ``missed`` at, re-sized on the tail model
    (its capacity below target / ``missed``: the count's lower bound is reported)."""
    replicas = missed + 1
    layout = cand.plan.layout
    count = replicas * layout.gpus_per_replica
    if count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {layout.replica_label}; at {missed}: {why}"
        return count_miss(cand.plan.gpu, what, count, space.max_gpus)
    capacity = (target.rate_rps or 0.0) / replicas
    plan = on_tail_model(cand, replicas, capacity, target, cal)
    return replace(cand, plan=plan, misses_at=missed, demotions=cand.demotions + 1)


def _confirmed(
    cand: Candidate,
    replicas: int,
    summary: SimSummary,
    capacity_rps: float,
    target: Workload,
    cal: Calibration,
) -> Candidate:
    """The candidate at ``replicas``, re-priced, with the simulated P99s of ``summary``."""
    sized = plan_for(cand.replica, cand.offer, cand.plan.layout.with_replicas(replicas), target, cal)
    update = {
        "ttft_p99_ms": summary.ttft.p99_ms,
        "tpot_p99_ms": summary.tpot.p99_ms,
        "p99_capacity_rps_per_replica": capacity_rps,
        "sized_on": "p99",
        "p99_source": "simulator",
    }
    return replace(cand, plan=sized.model_copy(update=update), confirmed=True)


def mean_floor(plan: Plan, sla: Sla) -> int:
    """The analytic ``plan``'s replica count when ``sla`` has mean limits (they hold at no fewer), else 1."""
    return plan.layout.replicas if sla.has_means else 1


def replicas_for(target: Workload, per_replica_rps: float, floor: int) -> int:
    """⌈target rate / per-replica rate⌉, never below ``floor`` (``mean_floor``)."""
    return max(math.ceil((target.rate_rps or 0.0) / per_replica_rps), 1, floor)


def _confirm_by_rate(
    cand: Candidate, target: Workload, sla: Sla, space: SearchSpace, cal: Calibration
) -> Candidate | Miss:
    """The candidate re-sized on the simulator's capacity: ``max_rate_under_slo`` in a narrow bracket
    around the tail model's rate, then runs at the replica counts it leaves open."""
    plan, replica = cand.plan, cand.replica
    guess = plan.p99_capacity_rps_per_replica
    found = max_rate_under_slo(
        replica, spec(target, 1.0), sla, sim_config(), steps=CONFIRM_STEPS, near_rps=guess
    )
    label = plan.layout.replica_label
    if not found.feasible or found.rate_rps <= 0:
        return trickle_miss(plan.gpu, found.reason or "P99 limits missed", label)
    replicas = replicas_for(target, found.rate_rps, cand.mean_floor)
    rate = target.rate_rps or 0.0
    fewer = replicas_for(target, found.rate_rps * (1.0 + BRACKET_RESOLUTION), cand.mean_floor)
    offline = offline_requests_per_s(replica, spec(target, 1.0))
    summary, why = steady_run_at(replica, target, rate / min(fewer, replicas), sla, offline)
    if fewer < replicas and why is None:  # the bracket straddled a replica count: the simulator settled it
        replicas = fewer
    elif fewer < replicas:
        summary, why = steady_run_at(replica, target, rate / replicas, sla, offline)
    for _ in range(MAX_REPLICA_BUMPS):
        if why is None:
            break
        replicas += 1
        summary, why = steady_run_at(replica, target, rate / replicas, sla, offline)
    count = replicas * plan.layout.gpus_per_replica
    if why is not None or count > space.max_gpus:
        what = f"on P99: {replicas} replicas of {label}, {found.rate_rps:.2f} req/s each"
        return count_miss(plan.gpu, what, count, space.max_gpus)
    return _confirmed(cand, replicas, summary, _held_rate(found.rate_rps, rate, replicas), target, cal)


def _held_rate(found_rps: float, target_rps: float, replicas: int) -> float:
    """The per-replica rate to report: the search's, moved to the rate the simulator passed at
    ``replicas`` when that settled the count, so that replicas = ⌈target / rate⌉ still holds."""
    if replicas == max(math.ceil(target_rps / found_rps), 1):
        return found_rps
    return target_rps / replicas

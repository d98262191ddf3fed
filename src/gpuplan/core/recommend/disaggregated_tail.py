"""Disaggregated plans under P99 limits: sized on means, confirmed and grown on the serving simulator.

**Seed.** A request's P99 is never below its mean, so a plan whose mean misses a P99 limit cannot
meet it: each candidate is first sized by ``disaggregated.py`` on mean limits of min(mean limit,
P99 limit) (``seed_sla``). That plan is the floor: confirmation only adds workers.

**Confirmation.** The simulator runs the plan's two pools (``core/sim/simulator.py``, a
``Disaggregation`` config with the prefill worker's own model) on the arrivals of the aggregated
confirmation (``confirm.py``: ``TAIL_REQUESTS`` Poisson requests at the target rate, seed, warm-up;
a passing run of a pool past ``LONG_RUN_UTILISATION`` of its analytic maximum is judged again on
``LONG_TAIL_REQUESTS``). The link is set so that each hand-off takes the plan's KV transfer. The
simulator's TTFT ends at the prefill worker's first token; the client's first token comes from the
decode worker after the transfer and at most ``FIRST_TOKEN_DECODE_STEPS_P99`` decode steps (the
step in progress, then the one that emits it), so the P99 TTFT judged and reported is the
simulated P99 + transfer + 2 × P99 TPOT. A run that misses grows the pool whose metric missed: TTFT
→ prefill workers, TPOT → decode workers, E2E → the pool with the larger share of it (TTFT against
output × TPOT), falling behind → the busier pool; each by ``max(1, ⌈GROWTH_SHARE × workers⌉)``, at
most ``MAX_GROWTH_RUNS`` runs a plan.

**Which plans.** Candidates are confirmed best first in the objective's order until
``DISAGGREGATED_FINALISTS`` are confirmed; under the cost objective a further candidate is tried
while its mean-sized price (a lower bound: growth only adds workers) is below the dearest of those,
up to ``MAX_DISAGGREGATED_CONFIRMED`` candidates. Unconfirmed disaggregated plans are not listed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.scenarios import mean_context
from gpuplan.core.recommend.confirm import (
    LONG_RUN_UTILISATION,
    LONG_TAIL_REQUESTS,
    TAIL_REQUESTS,
    WARMUP_FRACTION,
    sim_config,
    spec,
)
from gpuplan.core.recommend.decode_pool import decode_at
from gpuplan.core.recommend.disaggregated import disaggregated_plan, disaggregated_plans, paired_at
from gpuplan.core.recommend.prefill_pool import PrefillOption, prefill_option
from gpuplan.core.recommend.request import GpuOffer, Objective, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.search import (
    DISAGGREGATED_MISS,
    LATENCY_MISS,
    Miss,
    candidate_layouts,
    count_miss,
    rank,
)
from gpuplan.core.sim.capacity import violation
from gpuplan.core.sim.config import Disaggregation
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import generate
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S
from gpuplan.core.workload import Workload

DISAGGREGATED_FINALISTS = 2
"""Disaggregated plans confirmed on the simulator: the best and one runner-up (the aggregated
finalists are three, ``tail.py``; a disaggregated run simulates every worker of both pools)."""
MAX_DISAGGREGATED_CONFIRMED = 4
"""Candidates tried at most (a grown plan can fall behind the next one's mean-sized price)."""
MAX_GROWTH_RUNS = 5
"""Simulated runs per candidate: the mean-sized pools and up to four growths."""
GROWTH_SHARE = 0.1
"""A missing pool grows by a tenth of its workers (at least one): a 20-worker prefill pool spans
+2 to +8 workers in four growths, a 2-worker decode pool +1 to +4."""
FIRST_TOKEN_DECODE_STEPS_P99 = 2.0
"""Decode steps from a prompt's KV arriving to its first token at the tail: a whole step in progress
waited (``disaggregated.py`` counts half on average), then the step that emits it."""


def seed_sla(sla: Sla) -> Sla:
    """``sla`` with each mean limit at most its P99 limit (module docstring)."""
    ttft = [x for x in (sla.ttft_ms, sla.ttft_p99_ms) if x is not None]
    tpot = [x for x in (sla.tpot_ms, sla.tpot_p99_ms) if x is not None]
    return sla.model_copy(update={"ttft_ms": min(ttft, default=None), "tpot_ms": min(tpot, default=None)})


@dataclass(frozen=True)
class Pools:
    """A disaggregated plan's worker models, rebuilt from the plan (one worker of each layout)."""

    decode_offer: GpuOffer
    decode_layout: Layout
    decode_replica: ReplicaModel
    prefill: PrefillOption


def pools_of(
    model: ModelSpec, offers: dict[str, GpuOffer], plan: Plan, target: Workload, cal: Calibration
) -> Pools:
    """The worker models of ``plan`` for ``target`` (InfeasibleError if one no longer builds)."""
    assert plan.prefill is not None
    offer, layout = offers[plan.gpu], plan.layout.with_replicas(1)
    context = target.input_tokens + target.output_tokens
    replica = ReplicaModel.build(model, offer.gpu, layout, context_tokens=context, cal=cal)
    pre_offer = offers[plan.prefill.gpu]
    pre = prefill_option(model, pre_offer, plan.prefill.to_layout(plan.layout).with_replicas(1), target, cal)
    if pre is None:
        raise InfeasibleError(f"prefill layout of {plan.gpu_types} does not hold a prompt")
    return Pools(offer, layout, replica, pre)


def pools_plan(
    model: ModelSpec,
    pools: Pools,
    workers: tuple[int, int],
    target: Workload,
    space: SearchSpace,
    cal: Calibration,
) -> Plan:
    """The analytic plan of ``workers`` = (prefill, decode) workers of ``pools`` carrying ``target``."""
    decode = decode_at(pools.decode_offer, pools.decode_layout, pools.decode_replica, workers[1], target)
    paired = paired_at(model, decode, pools.prefill, workers[0], target, space)
    return disaggregated_plan(paired, target, cal, space.kv_transport)


def _workers(plan: Plan) -> tuple[int, int]:
    assert plan.prefill is not None and plan.decode is not None
    return plan.prefill.workers, plan.decode.workers


def _label(workers: tuple[int, int]) -> str:
    return f"{workers[0]}P{workers[1]}D"


def simulate_pools(
    model: ModelSpec, pools: Pools, plan: Plan, target: Workload, sla: Sla, cal: Calibration, requests: int
) -> SimSummary:
    """One simulated run of ``plan``'s pools at the target rate (module docstring)."""
    pre = pools.prefill
    context = target.input_tokens + target.output_tokens
    prefill = ReplicaModel.build(model, pre.offer.gpu, pre.layout, context_tokens=context, cal=cal)
    prompt_bytes = (target.input_tokens + 1) * pools.decode_replica.memory.kv_bytes_per_token
    link = prompt_bytes / ((plan.kv_transfer_ms or 0.0) / MS_PER_S) if plan.kv_transfer_ms else None
    p, d = _workers(plan)
    pools_config = Disaggregation(prefill_replicas=p, decode_replicas=d, kv_transfer_bytes_per_s=link)
    config = sim_config().model_copy(update={"disaggregation": pools_config})
    work = generate(spec(target, target.rate_rps or 0.0, requests))
    result = simulate(pools.decode_replica, work, config, prefill=prefill)
    return summarise(result, slo=sla, warmup_fraction=WARMUP_FRACTION)


@dataclass(frozen=True)
class Run:
    """A simulated run judged: the client's P99 TTFT, the pools to grow and why (none: it holds)."""

    summary: SimSummary
    ttft_p99_ms: float
    grow: tuple[bool, bool]
    why: str | None


def judge(plan: Plan, summary: SimSummary, sla: Sla, rate_rps: float) -> Run:
    """Whether ``summary`` meets the P99 limits, and which pool a miss grows (module docstring)."""
    tpot = summary.tpot.p99_ms or 0.0
    ttft = (summary.ttft.p99_ms or 0.0) + (plan.kv_transfer_ms or 0.0) + FIRST_TOKEN_DECODE_STEPS_P99 * tpot
    output = plan.output_tokens_per_s / plan.requests_per_s if plan.requests_per_s else 1.0
    prompt_led = ttft > tpot * output  # the larger share of an E2E
    checks = (
        ("TTFT", ttft, sla.ttft_p99_ms, (True, False)),
        ("TPOT", tpot, sla.tpot_p99_ms, (False, True)),
        ("E2E", summary.e2e.p99_ms or 0.0, sla.e2e_p99_ms, (prompt_led, not prompt_led)),
    )
    grow, why = (False, False), None
    for name, value, limit, pools in checks:
        if limit is not None and value > limit:
            grow = (grow[0] or pools[0], grow[1] or pools[1])
            why = why or f"P99 {name} {value:,.0f} ms > {limit:,.0f} ms"
    behind = violation(summary, Sla(), rate_rps)
    if behind is not None:
        pre, dec = plan.prefill, plan.decode
        busier = pre is not None and dec is not None and pre.busy_share >= dec.busy_share
        grow, why = (grow[0] or busier, grow[1] or not busier), why or behind
    return Run(summary, ttft, grow, why)


def _steady(model: ModelSpec, pools: Pools, plan: Plan, target: Workload, sla: Sla, cal: Calibration) -> Run:
    """A run of ``TAIL_REQUESTS``, judged again on ``LONG_TAIL_REQUESTS`` when it passes with a pool
    past ``LONG_RUN_UTILISATION`` of its analytic maximum."""
    rate = target.rate_rps or 0.0
    run = judge(plan, simulate_pools(model, pools, plan, target, sla, cal, TAIL_REQUESTS), sla, rate)
    if run.why is None and _utilisation(pools, plan, target) > LONG_RUN_UTILISATION:
        long = simulate_pools(model, pools, plan, target, sla, cal, LONG_TAIL_REQUESTS)
        run = judge(plan, long, sla, rate)
    return run


def _utilisation(pools: Pools, plan: Plan, target: Workload) -> float:
    """The busier pool's share of its analytic maximum: prefill ρ; decode λ over W_d workers at their
    KV/engine batch capacity (N / (output · t_decode(N)) each)."""
    step, workers = pools.decode_replica.step, _workers(plan)
    cap = pools.decode_replica.capacity(target)
    per_worker_rps = cap / (target.output_tokens * step.decode_s(batch=cap, context=mean_context(target)))
    decode = (target.rate_rps or 0.0) / (workers[1] * per_worker_rps)
    return max(plan.prefill.busy_share if plan.prefill else 0.0, decode)


def _grown(workers: tuple[int, int], grow: tuple[bool, bool]) -> tuple[int, int]:
    def more(n: int, yes: bool) -> int:
        return n + max(1, math.ceil(GROWTH_SHARE * n)) if yes else n

    return more(workers[0], grow[0]), more(workers[1], grow[1])


def confirm_pools(
    model: ModelSpec,
    pools: Pools,
    seed: Plan,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> Plan | Miss:
    """``seed`` confirmed on the simulator, its missing pools grown until its P99s hold (module
    docstring), or why not within ``MAX_GROWTH_RUNS`` runs or ``space.max_gpus``."""
    start = workers = _workers(seed)
    plan = seed
    steps: list[str] = []
    for _ in range(MAX_GROWTH_RUNS):
        if plan.num_gpus > space.max_gpus:
            return count_miss(
                plan.gpu, f"disaggregated {_label(workers)} on P99", plan.num_gpus, space.max_gpus
            )
        run = _steady(model, pools, plan, target, sla, cal)
        if run.why is None:
            return _confirmed(plan, run, start, steps)
        workers = _grown(workers, run.grow)
        steps.append(f"at {_label(_workers(plan))} {run.why}")
        plan = pools_plan(model, pools, workers, target, space, cal)
    runs = f"{MAX_GROWTH_RUNS} simulated runs ({steps[-1]})"
    reason = f"disaggregated {_label(start)}: P99 limits still missed after {runs}"
    return Miss(Rejection(gpu=seed.gpu, kind="latency", reason=reason), LATENCY_MISS + 0.999)


def _confirmed(plan: Plan, run: Run, start: tuple[int, int], steps: Sequence[str]) -> Plan:
    """``plan`` with the run's P99s and, in words, how its pools got there from ``start``."""
    now = _workers(plan)
    p99 = f"P99 TTFT {run.ttft_p99_ms:,.0f} ms, TPOT {run.summary.tpot.p99_ms or 0.0:,.1f} ms"
    if now == start:
        words = f"the mean-sized pools {_label(start)} meet the P99 limits on the simulator ({p99})"
    else:
        grew = [
            f"{name} {a} -> {b} workers"
            for name, a, b in zip(("prefill", "decode"), start, now, strict=True)
            if a != b
        ]
        words = (
            f"grown from the mean-sized {_label(start)}: {', '.join(grew)} ({'; '.join(steps)}); then {p99}"
        )
    update = {
        "sized_on": "p99",
        "p99_source": "simulator",
        "ttft_p99_ms": run.ttft_p99_ms,
        "tpot_p99_ms": run.summary.tpot.p99_ms,
        "p99_pools": words,
    }
    return plan.model_copy(update=update)


def size_disaggregated_on_p99(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    objective: Objective,
) -> tuple[list[Plan], dict[str, list[Miss]]]:
    """The disaggregated candidates sized on ``seed_sla``, the leaders confirmed and grown on the
    simulator (module docstring), and per GPU type the reasons for none."""
    layouts = {o.gpu.id: list(candidate_layouts(model, o.gpu, space)) for o in offers}
    seeds, rejections = disaggregated_plans(model, offers, layouts, target, seed_sla(sla), space, cal)
    misses = {r.gpu: [Miss(r, DISAGGREGATED_MISS[r.kind])] for r in rejections}
    by_id = {o.gpu.id: o for o in offers}
    confirmed: list[Plan] = []
    for tried, seed in enumerate(rank(seeds, objective)):
        if tried >= MAX_DISAGGREGATED_CONFIRMED or not _may_enter(seed, confirmed, objective):
            break
        result = confirm_pools(
            model, pools_of(model, by_id, seed, target, cal), seed, target, sla, space, cal
        )
        if isinstance(result, Miss):
            misses.setdefault(seed.gpu, []).append(result)
        else:
            confirmed.append(result)
    return confirmed, misses


def _may_enter(seed: Plan, confirmed: Sequence[Plan], objective: Objective) -> bool:
    """Fewer than the finalists confirmed, or (cost) ``seed``'s lower-bound price below the dearest finalist."""
    if len(confirmed) < DISAGGREGATED_FINALISTS:
        return True
    if objective != "cost" or seed.usd_per_hour is None:
        return False
    kth = rank(confirmed, objective)[DISAGGREGATED_FINALISTS - 1]
    return kth.usd_per_hour is not None and seed.usd_per_hour < kth.usd_per_hour

"""``recommend``: the cheapest plan that meets the SLA, the runner-ups, and why not the others."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.cost import OwnershipAssumptions
from gpuplan.errors import InfeasibleError
from gpuplan.models.spec import ModelSpec
from gpuplan.perf.calibration import Calibration, default_calibration
from gpuplan.recommend.explain import assumptions, explain
from gpuplan.recommend.request import (
    GpuOffer,
    Objective,
    Plan,
    Recommendation,
    Rejection,
    SearchSpace,
    ServingTarget,
    Sla,
)
from gpuplan.recommend.search import Miss, rank, search
from gpuplan.recommend.tail import size_on_p99
from gpuplan.sim.simulator import Progress

__all__ = ["GpuOffer", "Plan", "Recommendation", "SearchSpace", "ServingTarget", "Sla", "recommend"]

MAX_PLANS = 10


def recommend(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: ServingTarget,
    *,
    sla: Sla | None = None,
    space: SearchSpace | None = None,
    objective: Objective = "cost",
    cal: Calibration | None = None,
    ownership: OwnershipAssumptions | None = None,
    progress: Progress | None = None,
) -> Recommendation:
    """Search, rank and explain; InfeasibleError (exit 2) with the nearest misses when nothing works.
    ``progress`` receives the share done of the P99 sizing (only called when the SLA names P99s)."""
    sla = sla or Sla()
    space = space or SearchSpace()
    cal = cal or default_calibration()
    plans, misses = search(model, offers, target, sla, space, cal=cal)
    if sla.has_percentiles:
        plans, tail_misses = size_on_p99(model, offers, plans, target, sla, space, cal, progress)
        for gpu, items in tail_misses.items():
            misses.setdefault(gpu, []).extend(items)
    budget = space.max_usd_per_hour
    over = [p for p in plans if budget is not None and (p.usd_per_hour or 0) > budget]
    plans = [p for p in plans if p not in over]
    if budget is not None and not any(p.usd_per_hour for p in plans):
        plans = [p for p in plans if p.usd_per_hour is not None]
    ranked = rank(plans, objective)
    winners = {p.gpu for p in ranked}
    rejected = _rejections(misses, over, winners, budget)
    if not ranked:
        nearest = sorted((m for ms in misses.values() for m in ms), key=lambda m: m.distance)
        raise InfeasibleError(
            f"no plan for {model.id} meets the request on {len(offers)} GPU types",
            nearest=[f"{m.rejection.gpu}: {m.rejection.reason}" for m in nearest],
            hint="relax the SLA, allow more GPUs (--max-gpus) or lower-precision weights (--dtypes)",
        )
    best_per_gpu = _best_per_gpu(ranked)
    return Recommendation(
        model=model.id,
        objective=objective,
        plans=best_per_gpu[:MAX_PLANS],
        rejected=rejected,
        explanation=explain(
            model, best_per_gpu, rejected, offers, target, sla, ownership or OwnershipAssumptions()
        ),
        assumptions=assumptions(space, sla),
    )


def _best_per_gpu(ranked: Sequence[Plan]) -> list[Plan]:
    """The best plan of each GPU type, in rank order, then further layouts of the leaders."""
    seen: set[str] = set()
    first: list[Plan] = []
    rest: list[Plan] = []
    for p in ranked:
        (rest if p.gpu in seen else first).append(p)
        seen.add(p.gpu)
    return first + rest


def _rejections(
    misses: dict[str, list[Miss]], over: Sequence[Plan], winners: set[str], budget: float | None
) -> list[Rejection]:
    """One reason per GPU type with no plan: its nearest miss."""
    out: list[Rejection] = []
    for gpu in sorted(set(misses) | {p.gpu for p in over}):
        if gpu in winners:
            continue
        items = misses.get(gpu, [])
        cheapest_over = min(
            (p for p in over if p.gpu == gpu), key=lambda p: p.usd_per_hour or 0, default=None
        )
        if cheapest_over is not None and budget is not None:
            out.append(
                Rejection(
                    gpu=gpu,
                    kind="budget",
                    reason=(
                        f"cheapest plan {cheapest_over.count}x{gpu} costs ${cheapest_over.usd_per_hour:,.2f}/h "
                        f"> budget ${budget:,.2f}/h"
                    ),
                )
            )
            continue
        out.append(min(items, key=lambda m: m.distance).rejection)
    return out

"""``recommend``: the cheapest plan that meets the SLA, the runner-ups, and why not the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.cost import OwnershipAssumptions
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend.confidence import (
    AtConfidence,
    Sized,
    confidence_line,
    margin,
    size_at_confidence,
)
from gpuplan.core.recommend.disaggregated_tail import size_disaggregated_on_p99
from gpuplan.core.recommend.explain import assumptions, explain
from gpuplan.core.recommend.intervals import with_intervals
from gpuplan.core.recommend.layout_kinds import pools_label, scope
from gpuplan.core.recommend.narrowing import with_narrowing
from gpuplan.core.recommend.request import (
    GpuOffer,
    LayoutKind,
    Objective,
    Plan,
    Recommendation,
    Rejection,
    SearchSpace,
)
from gpuplan.core.recommend.search import Miss, one_replica, rank, search, searches_disaggregated
from gpuplan.core.recommend.tail import MAX_PLANS, best_per_gpu, size_on_p99
from gpuplan.core.sim.simulator import Progress
from gpuplan.core.sla import Sla
from gpuplan.core.workload import SERVING_KINDS, Workload

__all__ = ["MAX_PLANS", "GpuOffer", "Plan", "Recommendation", "SearchSpace", "recommend"]


def recommend(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    *,
    sla: Sla | None = None,
    space: SearchSpace | None = None,
    objective: Objective = "cost",
    cal: Calibration,
    ownership: OwnershipAssumptions | None = None,
    progress: Progress | None = None,
    uncertainty: Uncertainty | None = None,
    price_basis: PriceBasis | None = None,
) -> Recommendation:
    """Search, rank and explain for a ``rate`` or ``concurrency`` target; InfeasibleError (exit 2) with the
    nearest misses when nothing works. ``progress``: share done of the P99 sizing; ``uncertainty``: intervals
    (``intervals.py``) and sizing at its confidence (``confidence.py``); unquoted offers are not ranked."""
    target, sla, space, layout_notes = _request(target, sla, space, uncertainty)
    all_offers, offers, no_quote = _quoted(offers)
    sizing = _sizing(model, offers, target, sla, space, cal, progress, objective, uncertainty)
    plans, misses, shown_as, at = sizing
    budget = space.max_usd_per_hour
    over = [p for p in plans if budget is not None and p.usd_per_hour is not None and p.usd_per_hour > budget]
    unpriced = [p for p in plans if budget is not None and p.usd_per_hour is None]
    plans = [p for p in plans if p not in over and p not in unpriced]
    ranked = rank(plans, objective)
    per_gpu = best_per_gpu(ranked)
    shown = _shown(ranked, per_gpu)
    winners = {p.gpu for p in ranked}
    rejected = _rejections(misses, over, winners, budget)
    rejected += _unpriced(unpriced, winners) + _ranked_out(per_gpu, shown) + no_quote
    if not ranked:
        raise _infeasible(model, all_offers, misses, rejected)
    restated = _once(shown_as)
    explanation = _explanation(model, per_gpu, rejected, all_offers, target, sla, ownership, at, restated)
    shown_plans = [_with_intervals(restated(p), model, offers, target, cal, uncertainty) for p in shown]
    return Recommendation(
        model=model.id,
        workload=target,
        sla=sla,
        objective=objective,
        price_basis=price_basis,
        confidence=at.confidence if at else None,
        plans=shown_plans,
        rejected=rejected,
        explanation=explanation + _pools_on_p99(shown_plans),
        assumptions=assumptions(space, sla, offers, price_basis) + layout_notes,
    )


def _sizing(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    progress: Progress | None,
    objective: Objective,
    uncertainty: Uncertainty | None,
) -> tuple[list[Plan], dict[str, list[Miss]], Callable[[Plan], Plan], AtConfidence | None]:
    """``_sized`` at the point estimate, or at the uncertainty's confidence (``confidence.py``) with its context."""
    if uncertainty is None or uncertainty.confidence is None:
        return (*_sized(model, offers, target, sla, space, cal, progress, objective), None)
    confidence = uncertainty.confidence
    at = AtConfidence(
        confidence=confidence,
        model=model,
        offers={o.gpu.id: o for o in offers},
        target=target,
        sla=sla,
        cal=cal,
        margins={
            o.gpu.id: margin(model=uncertainty.model, calibrated=_fitted(cal, o), confidence=confidence)
            for o in offers
        },
        space=space,
    )

    def size(group: Sequence[GpuOffer], t: Workload, s: Sla, kinds: tuple[LayoutKind, ...] | None) -> Sized:
        kind_space = space if kinds is None else space.model_copy(update={"layout_kinds": kinds})
        return _sized(model, group, t, s, kind_space, cal, progress, objective)

    return (*size_at_confidence(context=at, size=size, calibrated=lambda o: _fitted(cal, o)), at)


def _pools_on_p99(plans: Sequence[Plan]) -> list[str]:
    """A line per disaggregated plan sized on P99: which pool the simulator grew, and why."""
    return [
        f"Disaggregated {pools_label(p)} on {p.gpu_types} sized on P99: {p.p99_pools}."
        for p in plans
        if p.p99_pools
    ]


def _explanation(
    model: ModelSpec,
    per_gpu: Sequence[Plan],
    rejected: Sequence[Rejection],
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    ownership: OwnershipAssumptions | None,
    at: AtConfidence | None,
    restated: Callable[[Plan], Plan],
) -> list[str]:
    """``explain``'s lines; at a confidence, of the plans restated at the target, with both counts."""
    own = ownership or OwnershipAssumptions()
    if at is None:
        return explain(model, per_gpu, rejected, offers, target, sla, own)
    lines = explain(model, [restated(p) for p in per_gpu[:4]], rejected, offers, target, sla, own)
    best = restated(per_gpu[0])
    lines.insert(1, confidence_line(best=best, confidence=at.confidence, margin=at.plan_margin(best)))
    return lines


def _infeasible(
    model: ModelSpec, offers: Sequence[GpuOffer], misses: dict[str, list[Miss]], rejected: Sequence[Rejection]
) -> InfeasibleError:
    """Nothing works: the nearest misses (budget and price reasons first)."""
    nearest = sorted((m for ms in misses.values() for m in ms), key=lambda m: m.distance)
    reasons = [f"{r.gpu}: {r.reason}" for r in rejected if r.kind in ("budget", "price")]
    return InfeasibleError(
        f"no plan for {model.id} meets the request on {len(offers)} GPU types",
        nearest=reasons + [f"{m.rejection.gpu}: {m.rejection.reason}" for m in nearest],
        hint="relax the SLA or the budget, allow more GPUs (--max-gpus) or lower-precision weights (--dtypes)",
    )


def _request(
    target: Workload, sla: Sla | None, space: SearchSpace | None, uncertainty: Uncertainty | None
) -> tuple[Workload, Sla, SearchSpace, list[str]]:
    """The request with its defaults, the layout kinds it can search and why any asked for is not."""
    sla = sla or Sla()
    at_confidence = uncertainty is not None and uncertainty.confidence is not None
    return _serving(target), sla, *scope(space or SearchSpace(), target, sla, at_confidence=at_confidence)


def _fitted(cal: Calibration, offer: GpuOffer) -> bool:
    """The error model's evidence level of a GPU: its family's factors fitted on measurements."""
    return cal.is_fitted(offer.gpu.family)


def _once(shown_as: Callable[[Plan], Plan]) -> Callable[[Plan], Plan]:
    """``shown_as`` computed once per plan (the explanation and the list share plans)."""
    done: dict[int, Plan] = {}

    def shown(plan: Plan) -> Plan:
        if id(plan) not in done:
            done[id(plan)] = shown_as(plan)
        return done[id(plan)]

    return shown


def _with_intervals(
    plan: Plan,
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    cal: Calibration,
    uncertainty: Uncertainty | None,
) -> Plan:
    """``plan`` with its intervals (``intervals.py``) and what would narrow them (``narrowing.py``); as it
    is without an error model."""
    if uncertainty is None or plan.layout_kind == "disaggregated":  # the error model has no split pools
        return plan
    gpu = next(o.gpu for o in offers if o.gpu.id == plan.gpu)
    replica = one_replica(model, gpu, plan.layout, target, cal)
    banded = with_intervals(plan=plan, replica=replica, target=target, uncertainty=uncertainty)
    return with_narrowing(
        plan=banded, replica=replica, target=target, uncertainty=uncertainty, model_id=model.id
    )


def _quoted(offers: Sequence[GpuOffer]) -> tuple[Sequence[GpuOffer], list[GpuOffer], list[Rejection]]:
    """All offers, those with a price on the basis, and a ``price`` rejection for each of the others: an
    offer with ``price_missing`` (no quote on the answer's price basis) is not searched, so that every
    ranked plan is priced on the same basis."""
    missing = [
        Rejection(gpu=o.gpu.id, kind="price", reason=o.price_missing) for o in offers if o.price_missing
    ]
    return offers, [o for o in offers if not o.price_missing], missing


def _sized(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
    progress: Progress | None,
    objective: Objective,
) -> tuple[list[Plan], dict[str, list[Miss]], Callable[[Plan], Plan]]:
    """The analytic search's plans and misses, re-sized on P99 when the SLA has P99 limits, and how a
    plan is shown (P99 sizing completes the tail-model capacity of the plans shown)."""
    if not sla.has_percentiles:
        return (*search(model, offers, target, sla, space, cal=cal), _as_is)
    plans: list[Plan] = []
    misses: dict[str, list[Miss]] = {}
    shown_as: Callable[[Plan], Plan] = _as_is
    if "aggregated" in space.layout_kinds:
        together = space.model_copy(update={"layout_kinds": ("aggregated",)})
        plans, misses = search(model, offers, target, sla, together, cal=cal)
        plans, tail_misses, shown_as = size_on_p99(
            model, offers, plans, target, sla, together, cal, progress, objective
        )
        for gpu, items in tail_misses.items():
            misses.setdefault(gpu, []).extend(items)
    if searches_disaggregated(space, target):
        split, split_misses = size_disaggregated_on_p99(model, offers, target, sla, space, cal, objective)
        plans += split
        for gpu, items in split_misses.items():  # an aggregated miss of the same GPU type says more
            misses.setdefault(gpu, items)
    return plans, misses, shown_as


def _as_is(plan: Plan) -> Plan:
    return plan


def _serving(target: Workload) -> Workload:
    """``target`` when it is a serving target (``Workload.serving_target``); ValueError otherwise."""
    if target.scenario not in SERVING_KINDS:
        raise ValueError(f"recommend sizes a rate or concurrency target, not a {target.scenario} workload")
    return target


def _shown(ranked: Sequence[Plan], per_gpu: Sequence[Plan]) -> list[Plan]:
    """The ``MAX_PLANS`` listed: the best of each GPU type first (so the list spans the GPU types),
    then further layouts of the leaders; reported in rank order, best first."""
    chosen = {id(p) for p in per_gpu[:MAX_PLANS]}
    return [p for p in ranked if id(p) in chosen]


def _ranked_out(per_gpu: Sequence[Plan], shown: Sequence[Plan]) -> list[Rejection]:
    """GPU types with a feasible plan that ranked below the ``MAX_PLANS`` shown: one line each, its best plan."""
    listed = {p.gpu_types for p in shown}
    out: list[Rejection] = []
    for p in per_gpu:  # each type's best plan comes first in this list
        if p.gpu_types in listed:
            continue
        listed.add(p.gpu_types)
        price = f", ${p.usd_per_hour:,.2f}/h" if p.usd_per_hour is not None else ""
        reason = (
            f"feasible, but its best plan ({p.num_gpus}x{p.gpu}{price}) ranks below the {MAX_PLANS} shown"
        )
        out.append(Rejection(gpu=p.gpu_types, kind="cost", reason=reason))
    return out


def _unpriced(plans: Sequence[Plan], winners: set[str]) -> list[Rejection]:
    """Under a budget a plan without a price cannot be checked against it."""
    gpus = sorted({p.gpu for p in plans} - winners)
    return [
        Rejection(
            gpu=gpu,
            kind="price",
            reason=f"no {gpu} price in the catalog to check against the budget "
            "(add one with --catalog prices.yaml)",
        )
        for gpu in gpus
    ]


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
                        f"cheapest plan {cheapest_over.num_gpus}x{gpu} costs "
                        f"${cheapest_over.usd_per_hour:,.2f}/h > budget ${budget:,.2f}/h"
                    ),
                )
            )
            continue
        out.append(min(items, key=lambda m: m.distance).rejection)
    return out

"""``recommend --confidence Q``: plans sized so their load and SLA still hold at quantile Q of the error model.

The error model (``core/calibration/error_model.py``) gives the distribution of log(measured /
predicted) per group. At confidence Q a plan must carry the target when the replica's capacity is at
its (1 − Q) quantile, and meet the limits when its latencies are at their Q quantile:

    capacity_Q = capacity · c,   c = min(1, exp q_throughput(1 − Q))
    latency_Q  = latency · f,    f = max(1, exp q_latency(Q))

which is the point-estimate search run on a target of rate / c (or concurrency / c) and limits of
limit / f (``at_margin``). The factors are clamped at 1 so that no confidence is more optimistic than
the point estimate, and every layout keeps at least the replicas the point estimate gives it: the
count is monotone non-decreasing in Q. The capacity group is the GPU's saturated throughput, the
latency groups those near the knee (a sized replica runs close to its SLA-limited load), each at the
GPU's evidence level (calibrated on measurements or priors only). The plans are then restated at the
real target (their figures are point predictions of the Q-sized plan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuplan.core.calibration.error_model import ErrorModel, group_path
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import factor
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.recommend.confirm import TAIL_REQUESTS, run_at
from gpuplan.core.recommend.disaggregated_tail import judge, pools_of, pools_plan, simulate_pools
from gpuplan.core.recommend.request import GpuOffer, LayoutKind, Plan, SearchSpace
from gpuplan.core.recommend.search import Miss, one_replica, plan_for
from gpuplan.core.sim.tail_model import tail_estimate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

LATENCY_REGIME = "near the knee"
CAPACITY_REGIME = "saturated"
P99_KEYS = ("sized_on", "ttft_p99_ms", "tpot_p99_ms", "p99_capacity_rps_per_replica", "p99_source")

Sized = tuple[list[Plan], dict[str, list[Miss]], Callable[[Plan], Plan]]
SizeFn = Callable[[Sequence[GpuOffer], Workload, Sla, tuple[LayoutKind, ...] | None], Sized]
"""The point-estimate sizing of ``recommend`` (search, then P99 sizing) on some offers, target and SLA
(and layout kinds: None for the request's)."""


@dataclass(frozen=True)
class Margin:
    """The factors a plan is sized with at one confidence: capacity ≤ 1, latencies ≥ 1."""

    capacity: float
    ttft: float
    tpot: float
    ttft_p99: float
    tpot_p99: float


def _path(family: str, regime: str, calibrated: bool, metric: str) -> tuple[str, ...]:
    return group_path(family=family, regime=regime, gpu_fitted=calibrated, engine_known=True, metric=metric)


def margin(*, model: ErrorModel, calibrated: bool, confidence: float) -> Margin:
    """The factors at ``confidence`` for a GPU whose family is (or is not) calibrated (module docstring)."""

    def slower(family: str, metric: str) -> float:
        return max(
            1.0, factor(model=model, path=_path(family, LATENCY_REGIME, calibrated, metric), p=confidence)
        )

    capacity_path = _path("throughput", CAPACITY_REGIME, calibrated, "output_tokens_per_s")
    return Margin(
        capacity=min(1.0, factor(model=model, path=capacity_path, p=1.0 - confidence)),
        ttft=slower("ttft", "ttft_ms_mean"),
        tpot=slower("tpot", "tpot_ms_mean"),
        ttft_p99=slower("ttft", "ttft_ms_p99"),
        tpot_p99=slower("tpot", "tpot_ms_p99"),
    )


def _over(limit: float | None, by: float) -> float | None:
    return None if limit is None else limit / by


def at_margin(*, target: Workload, sla: Sla, margin: Margin) -> tuple[Workload, Sla]:
    """The target carried by a capacity ``margin.capacity`` of the prediction (load / c) and the limits
    met by latencies ``margin.*`` times the prediction (limit / f)."""
    load = (
        {"rate_rps": target.rate_rps / margin.capacity}
        if target.rate_rps is not None
        else {"concurrency": (target.concurrency or 1.0) / margin.capacity}
    )
    limits = {
        "ttft_ms": _over(sla.ttft_ms, margin.ttft),
        "tpot_ms": _over(sla.tpot_ms, margin.tpot),
        "ttft_p99_ms": _over(sla.ttft_p99_ms, margin.ttft_p99),
        "tpot_p99_ms": _over(sla.tpot_p99_ms, margin.tpot_p99),
        "e2e_p99_ms": _over(sla.e2e_p99_ms, max(margin.ttft_p99, margin.tpot_p99)),
    }
    return target.model_copy(update=load), sla.model_copy(update=limits)


def stricter(a: Margin, b: Margin) -> Margin:
    """Each factor at the stricter of ``a``'s and ``b``'s: the margin of pools on two evidence levels."""
    return Margin(
        capacity=min(a.capacity, b.capacity),
        ttft=max(a.ttft, b.ttft),
        tpot=max(a.tpot, b.tpot),
        ttft_p99=max(a.ttft_p99, b.ttft_p99),
        tpot_p99=max(a.tpot_p99, b.tpot_p99),
    )


LayoutKey = tuple[str | int, ...]


def layout_key(plan: Plan) -> LayoutKey:
    """What makes two plans the same layout at different replica (or pool worker) counts (their kind
    included; for a disaggregated plan both pools' GPU types and layouts)."""
    lay = plan.layout
    key = (plan.gpu, lay.tp, lay.pp, lay.weight_dtype.name, lay.resolved_kv_dtype.name, plan.layout_kind)
    pre = plan.prefill
    return (
        key
        if pre is None
        else (*key, lay.ep, lay.attention_dp, pre.gpu, pre.tp, pre.pp, pre.ep, pre.attention_dp)
    )


@dataclass(frozen=True)
class AtConfidence:
    """The context a Q-sized plan is restated and re-counted in."""

    confidence: float
    model: ModelSpec
    offers: dict[str, GpuOffer]
    target: Workload
    sla: Sla
    cal: Calibration
    margins: dict[str, Margin]
    """Per GPU id."""
    space: SearchSpace = field(default_factory=SearchSpace)

    def plan_margin(self, plan: Plan) -> Margin:
        """The margin ``plan`` is sized at: its GPU's, the stricter of its pools' GPUs' (disaggregated)."""
        own = self.margins[plan.gpu]
        return own if plan.prefill is None else stricter(own, self.margins[plan.prefill.gpu])

    def pools_at_least(self, plan: Plan, point: Plan, target: Workload) -> Plan:
        """A disaggregated ``plan`` with each pool at no fewer workers than ``point``'s, its P99 fields kept."""
        assert plan.prefill and plan.decode and point.prefill and point.decode
        workers = (
            max(plan.prefill.workers, point.prefill.workers),
            max(plan.decode.workers, point.decode.workers),
        )
        if workers == (plan.prefill.workers, plan.decode.workers):
            return plan
        pools = pools_of(self.model, self.offers, plan, target, self.cal)
        grown = pools_plan(self.model, pools, workers, target, self.space, self.cal)
        return grown.model_copy(update={k: getattr(plan, k) for k in (*P99_KEYS, "p99_pools")})

    def restate_pools(self, plan: Plan) -> Plan:
        """A Q-sized disaggregated plan's figures at the real target: its pools' point predictions, its
        P99s from a simulated run there (``disaggregated_tail.py``)."""
        assert plan.prefill and plan.decode
        pools = pools_of(self.model, self.offers, plan, self.target, self.cal)
        out = pools_plan(
            self.model, pools, (plan.prefill.workers, plan.decode.workers), self.target, self.space, self.cal
        )
        keep = {"count_at_point_estimate": plan.count_at_point_estimate, "p99_pools": plan.p99_pools}
        if plan.sized_on != "p99":
            return out.model_copy(update=keep)
        summary = simulate_pools(self.model, pools, out, self.target, self.sla, self.cal, TAIL_REQUESTS)
        run = judge(out, summary, self.sla, self.target.rate_rps or 0.0)
        p99 = {"ttft_p99_ms": run.ttft_p99_ms, "tpot_p99_ms": summary.tpot.p99_ms}
        return out.model_copy(update={**keep, **p99, "sized_on": "p99", "p99_source": "simulator"})

    def replica_plan(self, plan: Plan, replicas: int, target: Workload) -> Plan:
        """``plan``'s layout at ``replicas`` carrying ``target``, its P99 fields kept."""
        offer = self.offers[plan.gpu]
        replica = one_replica(self.model, offer.gpu, plan.layout, target, self.cal)
        sized = plan_for(replica, offer, plan.layout.with_replicas(replicas), target, self.cal)
        return sized.model_copy(update={k: getattr(plan, k) for k in P99_KEYS})

    def restate(self, plan: Plan) -> Plan:
        """A Q-sized plan's figures at the real target: point predictions of that plan; its P99s from
        the same source at the real per-replica rate, its P99 capacity times the capacity factor."""
        if plan.layout_kind == "disaggregated":
            return self.restate_pools(plan)
        offer = self.offers[plan.gpu]
        replica = one_replica(self.model, offer.gpu, plan.layout, self.target, self.cal)
        out = plan_for(replica, offer, plan.layout, self.target, self.cal)
        keep = {"count_at_point_estimate": plan.count_at_point_estimate}
        if plan.sized_on != "p99":
            return out.model_copy(update=keep)
        rate = (self.target.rate_rps or 0.0) / plan.layout.replicas
        if plan.p99_source == "simulator":
            summary = run_at(replica, self.target, rate, self.sla)[0]
            ttft, tpot = summary.ttft.p99_ms, summary.tpot.p99_ms
        else:
            shape = {"input_tokens": self.target.input_tokens, "output_tokens": self.target.output_tokens}
            est = tail_estimate(replica, **shape, rate_rps=rate)
            ttft, tpot = est.ttft_p99_ms, est.tpot_p99_ms
        capacity = plan.p99_capacity_rps_per_replica
        scaled = None if capacity is None else capacity * self.margins[plan.gpu].capacity
        p99 = {"ttft_p99_ms": ttft, "tpot_p99_ms": tpot, "p99_capacity_rps_per_replica": scaled}
        return out.model_copy(update={**keep, **p99, "sized_on": "p99", "p99_source": plan.p99_source})


def size_at_confidence(
    *,
    context: AtConfidence,
    size: SizeFn,
    calibrated: Callable[[GpuOffer], bool],
) -> Sized:
    """Every offer sized at its margin (offers grouped by GPU evidence, each group sized once on its
    transformed target and limits), each layout at no fewer replicas than the point estimate gives
    it, ``count_at_point_estimate`` set; the returned function restates a plan at the real target."""
    point_plans = size(list(context.offers.values()), context.target, context.sla, None)[0]
    point = {layout_key(p): p for p in point_plans}
    plans: list[Plan] = []
    misses: dict[str, list[Miss]] = {}
    shown: list[Callable[[Plan], Plan]] = []
    for fitted in (True, False):
        group = [o for o in context.offers.values() if calibrated(o) is fitted]
        if not group:
            continue
        target, sla = at_margin(
            target=context.target, sla=context.sla, margin=context.margins[group[0].gpu.id]
        )
        sized, missed, shown_as = size(group, target, sla, None)
        plans += [_at_least(context, p, point.get(layout_key(p)), target) for p in sized]
        for gpu, items in missed.items():
            misses.setdefault(gpu, []).extend(items)
        shown.append(shown_as)
    for target, sized in _across_levels(context, size, calibrated):
        plans += [_at_least(context, p, point.get(layout_key(p)), target) for p in sized]

    def restated(plan: Plan) -> Plan:
        for shown_as in shown:
            plan = shown_as(plan)
        return context.restate(plan)

    return plans, misses, restated


def _across_levels(
    context: AtConfidence, size: SizeFn, calibrated: Callable[[GpuOffer], bool]
) -> list[tuple[Workload, list[Plan]]]:
    """With mixed pools, the disaggregated plans whose pools sit on GPUs of both evidence levels, sized
    at the stricter of the two margins (the group runs pair pools within one level only)."""
    offers = list(context.offers.values())
    fitted = [o for o in offers if calibrated(o)]
    space = context.space
    if not (space.mixed_pools and "disaggregated" in space.layout_kinds) or len(fitted) in (0, len(offers)):
        return []
    other = next(o for o in offers if not calibrated(o))
    both = stricter(context.margins[fitted[0].gpu.id], context.margins[other.gpu.id])
    target, sla = at_margin(target=context.target, sla=context.sla, margin=both)
    ids = {o.gpu.id for o in fitted}
    sized = size(offers, target, sla, ("disaggregated",))[0]
    return [
        (target, [p for p in sized if p.prefill is not None and (p.prefill.gpu in ids) != (p.gpu in ids)])
    ]


def _at_least(context: AtConfidence, plan: Plan, point: Plan | None, target: Workload) -> Plan:
    """``plan`` with ``count_at_point_estimate`` and, where the point estimate needs more replicas of
    its layout (more workers in a pool), those."""
    if point is not None and plan.layout_kind == "disaggregated":
        plan = context.pools_at_least(plan, point, target)
    elif point is not None and point.layout.replicas > plan.layout.replicas:
        plan = context.replica_plan(plan, point.layout.replicas, target)
    point_count = None if point is None else point.num_gpus
    return plan.model_copy(update={"count_at_point_estimate": point_count})


def confidence_line(*, best: Plan, confidence: float, margin: Margin) -> str:
    """'6x H100 meet the SLA at the point estimate; 7 at 90 % confidence (...)'."""
    point = best.count_at_point_estimate
    at_point = f"{point}x {best.gpu_types} meet the SLA at the point estimate; " if point is not None else ""
    return (
        f"Sized at {confidence:.0%} confidence: {at_point}{best.num_gpus} at {confidence:.0%} confidence "
        "(sized on a capacity "
        f"{margin.capacity:.2f}x the prediction and latencies {margin.ttft:.2f}x (TTFT) and {margin.tpot:.2f}x "
        "(TPOT) it, the error model's quantiles; plans are ranked at this confidence)."
    )

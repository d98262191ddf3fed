"""Enumerate GPU × dtype × TP × PP layouts, size the replicas for the load under the SLA, rank.

Stages (SkyPilot-style candidate → evaluate → select):

1. candidates: every allowed dtype, TP that divides the heads and stays inside the scale-up domain,
   PP, with tp·pp ≤ max_gpus; for MoE models also wide expert parallelism, attention DP × EP over
   1, 2 and 4 whole nodes (``WIDE_EP_NODES``);
2. evaluate: fit in memory → unloaded latency meets the SLA → the largest per-replica concurrency
   that still meets it (bisection; latency grows with load) → replicas for the target load, with a
   headroom so replicas do not run at the edge where tail latency explodes → cost;
3. select: rank by the objective; keep, per GPU type, the reason its best attempt failed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.cost import monthly_usd, usd_per_million_tokens
from gpuplan.core.errors import GpuplanError, InfeasibleError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel, decode_bound
from gpuplan.core.perf.kv_transfer import DISAGGREGATING_ENGINES
from gpuplan.core.perf.layout import Layout, check_layout
from gpuplan.core.perf.memory import layout_weight_bytes, usable_memory_bytes
from gpuplan.core.perf.scenarios import prefill_share_s
from gpuplan.core.recommend.disaggregated import disaggregated_plans
from gpuplan.core.recommend.request import (
    GpuOffer,
    MemoryBreakdownGib,
    Objective,
    Plan,
    Rejection,
    SearchSpace,
    memory_in_use_gib,
)
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S
from gpuplan.core.workload import Workload

BISECTION_STEPS = 12
"""Bisection steps: 2^12 resolves the load to 0.025 % of its ceiling."""
MIN_RATE_RPS = 1e-3
"""An almost idle replica: the unloaded-latency check."""
WEIGHT_SHARE_LIMIT = 0.8
"""A layout whose weights take under 80 % of a GPU leaves room for KV; deeper PP is not tried."""
WIDE_EP_NODES = (1, 2, 4)
"""Nodes one wide-EP replica spans (TP 1, attention DP = EP = the nodes' GPUs): SGLang's and
DeepSeek's decode deployments run EP16-EP144 (2-18 nodes; https://lmsys.org/blog/2025-05-05-large-scale-ep);
four nodes keep the search small."""
COUNT_MISS, LATENCY_MISS, MEMORY_MISS, LAYOUT_MISS = 1.0, 2.0, 3.0, 4.0
"""Miss distances by kind: a plan that only needs more GPUs is nearer than one too slow even when
idle, which is nearer than one that does not fit at all."""


@dataclass(frozen=True)
class Miss:
    """A candidate that failed, with how far off it was (for ranking the 'nearest misses')."""

    rejection: Rejection
    distance: float


def native_weight_dtype(name: str, gpu: GpuSpec) -> str:
    """``name``, or fp16 for bf16 on a GPU without bf16 math (T4, V100): same bytes, the format the
    engines load a bf16 checkpoint in there (vLLM's ``--dtype auto``)."""
    return "fp16" if name == "bf16" and gpu.dense_tflops.bf16 is None else name


def candidate_layouts(model: ModelSpec, gpu: GpuSpec, space: SearchSpace) -> Iterator[Layout]:
    """Valid layouts for one GPU type, smallest first. Pipeline stages are added only until the
    weights fit (PP serves capacity, not speed: each stage adds a hop to every token)."""
    for dtype in dict.fromkeys(native_weight_dtype(name, gpu) for name in space.weight_dtypes):
        for tp in space.tp_options:
            for pp in sorted(space.pp_options):
                if tp * pp > space.max_gpus:
                    continue
                layout = _layout(space, tp=tp, pp=pp, weight_dtype=dtype)
                try:
                    check_layout(model, gpu, layout)
                except GpuplanError:
                    continue
                yield layout
                if _weights_fit(model, gpu, layout):
                    break
        yield from wide_ep_layouts(model, gpu, space, dtype)


def _layout(space: SearchSpace, **shape: Any) -> Layout:
    """A layout of ``shape`` with the space's engine, release and speculative decoding."""
    return Layout(
        engine=space.engine, engine_version=space.engine_version, speculative=space.speculative, **shape
    )


def wide_ep_layouts(model: ModelSpec, gpu: GpuSpec, space: SearchSpace, dtype: str) -> Iterator[Layout]:
    """MoE only: one TP-1 attention rank per GPU over ``WIDE_EP_NODES`` whole nodes, the experts split
    by EP over all of them (``ep = attention_dp``), within ``max_gpus``."""
    if model.moe is None:
        return
    node = gpu.interconnect.node_gpus
    for nodes in WIDE_EP_NODES:
        ranks = nodes * node
        if ranks < 2 or ranks > min(space.max_gpus, model.moe.num_experts):
            continue
        layout = _layout(space, tp=1, ep=ranks, attention_dp=ranks, weight_dtype=dtype)
        try:
            check_layout(model, gpu, layout)
        except GpuplanError:
            continue
        yield layout


def _weight_bytes(model: ModelSpec, layout: Layout) -> float:
    """Weight bytes on one GPU of ``layout``."""
    return layout_weight_bytes(model, layout).total


def _weights_fit(model: ModelSpec, gpu: GpuSpec, layout: Layout) -> bool:
    return _weight_bytes(model, layout) < usable_memory_bytes(gpu) * WEIGHT_SHARE_LIMIT


def one_replica(
    model: ModelSpec, gpu: GpuSpec, layout: Layout, target: Workload, cal: Calibration
) -> ReplicaModel:
    """One replica of ``layout`` sized for the target's context; InfeasibleError if it does not fit."""
    return ReplicaModel.build(
        model,
        gpu,
        layout.with_replicas(1),
        context_tokens=target.input_tokens + target.output_tokens,
        cal=cal,
    )


def _meets(sla: Sla, ttft_s: float, tpot_s: float) -> bool:
    return (sla.ttft_ms is None or ttft_s * MS_PER_S <= sla.ttft_ms) and (
        sla.tpot_ms is None or tpot_s * MS_PER_S <= sla.tpot_ms
    )


def _workload(target: Workload, load: float) -> Workload:
    """Per-replica workload at ``load``: requests/s for a rate target, requests in flight otherwise.

    The target was validated (its kind is ``rate`` or ``concurrency`` with exactly that load), so each
    probe is a copy at another load, not a new validation: ``model_copy`` took a 32B search from 0.217
    to 0.20 s against validating ~3,800 probes (``benchmarks/bench_recommend.py``, best of 5)."""
    if target.rate_rps is not None:
        return target.model_copy(update={"rate_rps": max(load, MIN_RATE_RPS)})
    return target.model_copy(update={"concurrency": max(load, 1.0)})


def max_load_under_sla(replica: ReplicaModel, target: Workload, sla: Sla) -> float:
    """Largest per-replica load (req/s or concurrency) whose TTFT/TPOT meet the SLA; 0 if none does.

    Latency rises with load, so bisection applies. The rate ceiling is the replica's offline
    throughput (beyond it the queue grows without bound).
    """
    lowest = _lowest_load(target)
    ttft, tpot, _, _ = replica.run(_workload(target, lowest))
    if not _meets(sla, ttft, tpot):
        return 0.0
    if target.rate_rps is not None:
        offline = Workload(
            scenario="offline", input_tokens=target.input_tokens, output_tokens=target.output_tokens
        )
        ceiling = replica.run(offline)[2] / target.output_tokens
    else:
        ceiling = replica.capacity(_workload(target, 1.0))
    ttft, tpot, _, _ = replica.run(_workload(target, ceiling))
    if _meets(sla, ttft, tpot):
        return ceiling
    lo, hi = lowest, ceiling
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        ttft, tpot, _, _ = replica.run(_workload(target, mid))
        lo, hi = (mid, hi) if _meets(sla, ttft, tpot) else (lo, mid)
    return lo if target.rate_rps is not None else math.floor(lo)


def _lowest_load(target: Workload) -> float:
    return MIN_RATE_RPS if target.rate_rps is not None else 1.0


def _replicas_needed(target: Workload, load_max: float, headroom: float) -> int:
    if target.concurrency is not None:
        return math.ceil(target.concurrency / max(math.floor(load_max * headroom), 1))
    return math.ceil((target.rate_rps or 0.0) / (load_max * headroom))


def _load_per_replica(target: Workload, replicas: int) -> float:
    """The load each replica carries when the target is spread evenly."""
    if target.concurrency is not None:
        return target.concurrency / replicas
    return (target.rate_rps or 0.0) / replicas


def evaluate(
    model: ModelSpec,
    offer: GpuOffer,
    layout: Layout,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> Plan | Miss:
    """Size and price one layout, or say why it cannot serve the target."""
    gpu = offer.gpu
    try:
        replica = one_replica(model, gpu, layout, target, cal)
    except InfeasibleError as exc:
        over = _weight_bytes(model, layout) / usable_memory_bytes(gpu)  # times the weights alone fill a GPU
        return Miss(Rejection(gpu=gpu.id, kind="memory", reason=exc.message), MEMORY_MISS + _squash(over))
    load_max = max_load_under_sla(replica, target, sla)
    if load_max <= 0:
        ttft, tpot, _, _ = replica.run(_workload(target, _lowest_load(target)))
        return Miss(
            Rejection(gpu=gpu.id, kind="latency", reason=_latency_reason(sla, ttft, tpot, layout)),
            LATENCY_MISS + _squash(_sla_excess(sla, ttft, tpot)),
        )
    replicas = _replicas_needed(target, load_max, space.headroom)
    count = replicas * layout.gpus_per_replica
    if count > space.max_gpus:
        return count_miss(gpu.id, f"{replicas} replicas of {layout.replica_label}", count, space.max_gpus)
    return _plan(
        replica,
        offer,
        layout.with_replicas(replicas),
        target,
        _load_per_replica(target, replicas),
        cal.is_fitted(gpu.family),
    )


def count_miss(gpu: str, what: str, count: int, max_gpus: int) -> Miss:
    """A plan that needs more than ``max_gpus``: 'needs N GPUs (what) > max K', nearer the fewer it needs."""
    return Miss(
        Rejection(gpu=gpu, kind="count", reason=f"needs {count} GPUs ({what}) > max {max_gpus}"),
        COUNT_MISS + min(count / max_gpus / 100, 0.99),
    )


def plan_for(
    replica: ReplicaModel, offer: GpuOffer, layout: Layout, target: Workload, cal: Calibration
) -> Plan:
    """Price and describe ``layout`` (its replicas set) carrying the target spread evenly."""
    load = _load_per_replica(target, layout.replicas)
    return _plan(replica, offer, layout, target, load, cal.is_fitted(offer.gpu.family))


def _plan(
    replica: ReplicaModel,
    offer: GpuOffer,
    layout: Layout,
    target: Workload,
    load: float,
    calibrated: bool,
) -> Plan:
    share = _workload(target, load)
    ttft, tpot, tok_s, running = replica.run(share)
    prefill_share = None
    if target.rate_rps is not None:  # served = offered below capacity (the model may have floored the rate)
        tok_s = load * target.output_tokens
        prefill_share = load * prefill_share_s(replica.step, replica.memory, share, max(running, 1.0))
    total_tok_s = tok_s * layout.replicas
    per_hour = offer.usd_per_gpu_hour * layout.num_gpus if offer.usd_per_gpu_hour else None
    context = target.input_tokens + target.output_tokens
    return Plan(
        gpu=offer.gpu.id,
        layout=layout,
        prefill_share=prefill_share,
        concurrency_per_replica=running,
        ttft_ms=ttft * MS_PER_S,
        tpot_ms=tpot * MS_PER_S,
        output_tokens_per_s=total_tok_s,
        requests_per_s=total_tok_s / target.output_tokens,
        usd_per_hour=per_hour,
        usd_per_month=monthly_usd(usd_per_hour=per_hour) if per_hour else None,
        usd_per_million_output_tokens=usd_per_million_tokens(usd_per_hour=per_hour, tokens_per_s=total_tok_s)
        if per_hour
        else None,
        # each attention-DP rank holds its own requests' KV
        memory_per_gpu_gib=memory_in_use_gib(
            replica.memory, running=running / layout.attention_dp, context_tokens=context
        ),
        memory_breakdown_gib=MemoryBreakdownGib.of(replica.memory),
        bound=decode_bound(replica.step, running),
        price_source=offer.price_source,
        price_quote=offer.price_quote,
        calibrated=calibrated,
    )


def _squash(excess: float) -> float:
    """Map an excess in [0, inf) to [0, 1), order-preserving, so misses of one kind rank by size."""
    return excess / (1.0 + excess) if math.isfinite(excess) else 0.999999


def _latency_reason(sla: Sla, ttft_s: float, tpot_s: float, layout: Layout) -> str:
    parts = []
    if sla.ttft_ms is not None and ttft_s * MS_PER_S > sla.ttft_ms:
        parts.append(f"TTFT {ttft_s * MS_PER_S:.0f} ms > {sla.ttft_ms:g} ms")
    if sla.tpot_ms is not None and tpot_s * MS_PER_S > sla.tpot_ms:
        parts.append(f"TPOT {tpot_s * MS_PER_S:.1f} ms > {sla.tpot_ms:g} ms")
    return " and ".join(parts) + f" even with one request (best layout {layout.replica_label})"


def _sla_excess(sla: Sla, ttft_s: float, tpot_s: float) -> float:
    ratios = [0.0]
    if sla.ttft_ms:
        ratios.append(ttft_s * MS_PER_S / sla.ttft_ms - 1)
    if sla.tpot_ms:
        ratios.append(tpot_s * MS_PER_S / sla.tpot_ms - 1)
    return max(ratios)


def search(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    *,
    cal: Calibration,
) -> tuple[list[Plan], dict[str, list[Miss]]]:
    """All feasible plans (unranked) and, per GPU type, the misses: aggregated replicas and
    disaggregated pools, as ``space.layout_kinds`` allows (``searches_disaggregated``)."""
    plans: list[Plan] = []
    misses: dict[str, list[Miss]] = {}
    layouts = {o.gpu.id: list(candidate_layouts(model, o.gpu, space)) for o in offers}
    for offer in offers:
        if not layouts[offer.gpu.id]:
            reason = "no TP/PP layout divides the model's heads within the limits"
            misses.setdefault(offer.gpu.id, []).append(
                Miss(Rejection(gpu=offer.gpu.id, kind="layout", reason=reason), LAYOUT_MISS)
            )
        if "aggregated" not in space.layout_kinds:
            continue
        for layout in layouts[offer.gpu.id]:
            result = evaluate(model, offer, layout, target, sla, space, cal)
            if isinstance(result, Plan):
                plans.append(result)
            else:
                misses.setdefault(offer.gpu.id, []).append(result)
    if searches_disaggregated(space, target):
        found, rejections = disaggregated_plans(model, offers, layouts, target, sla, space, cal)
        plans += found
        for r in rejections:  # an aggregated miss of the same GPU type says more (its numbers)
            if r.gpu not in misses:
                misses[r.gpu] = [Miss(r, DISAGGREGATED_MISS[r.kind])]
    return plans, misses


DISAGGREGATED_MISS = {
    "count": COUNT_MISS + 0.999,
    "latency": LATENCY_MISS + 0.999,
    "memory": MEMORY_MISS + 0.999,
    "layout": LAYOUT_MISS + 0.999,
}
"""A disaggregated miss ranks behind every aggregated miss of its kind (those carry the numbers)."""


def searches_disaggregated(space: SearchSpace, target: Workload) -> bool:
    """Disaggregated pools are searched when asked for, at a request rate, on an engine that has the mode."""
    return (
        "disaggregated" in space.layout_kinds
        and target.rate_rps is not None
        and space.engine in DISAGGREGATING_ENGINES
    )


def rank(plans: Sequence[Plan], objective: Objective) -> list[Plan]:
    """Best first: cheapest (ties: faster), lowest TPOT, or highest throughput per dollar."""
    if objective == "latency":
        return sorted(plans, key=lambda p: (p.tpot_ms, p.ttft_ms, p.usd_per_hour or math.inf))
    if objective == "throughput":
        return sorted(
            plans,
            key=lambda p: (-(p.output_tokens_per_s / (p.usd_per_hour or math.inf)), p.num_gpus, _split(p)),
        )
    return sorted(
        plans,
        key=lambda p: (
            p.usd_per_hour if p.usd_per_hour is not None else math.inf,
            p.num_gpus,
            _split(p),
            p.tpot_ms,
        ),
    )


def _split(plan: Plan) -> bool:
    """On a tie an aggregated plan ranks first: one kind of worker, no KV transfer to run."""
    return plan.layout_kind != "aggregated"

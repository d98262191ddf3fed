"""Disaggregated plans: a prefill pool and a decode pool, each sized on its own, paired and priced.

**Decode pool.** A decode worker runs decode steps only (no prompt chunks in its steps). For every
GPU type and layout that holds the whole context, the largest batch N whose step meets the TPOT
limit (bisection: the step grows with N), capped by the KV and engine capacity, sets what one worker
carries: λ_d = N / (output · t_decode(N)) requests/s (Little's law over the answer's decode steps).
The pool has W_d = ⌈λ / (headroom · λ_d)⌉ workers; at the target each runs the batch N that solves
N = (λ / W_d) · output · t_decode(N) (plain iteration from N = 1 climbs to it), and TPOT = t_decode(N).

**Prefill pool.** A prefill worker runs prompts only, packed into chunks of the engine's batched
tokens: one prompt occupies it s (its share of a full chunk) and alone takes t₁ (its own chunks).
Prompts queue as M/D/1 (Pollaczek–Khinchine, deterministic service): TTFT_prefill = t₁ + ρ·s / (2(1 − ρ))
at utilisation ρ = λ_p · s.

**Together.** TTFT = TTFT_prefill + the KV transfer (``core/perf/kv_transfer.py``) + 1.5 decode steps
(the decode worker admits the request at its next step boundary, half a step on average, and emits
the first token after one step). For a pair the prefill budget W = TTFT limit − t₁ − transfer −
1.5·TPOT gives the highest utilisation ρ* = 2W / (s + 2W) (the M/D/1 wait solved for ρ), capped at
the headroom, and the pool has W_p = ⌈λ · s / ρ*⌉ workers. Each decode option is paired with every
prefill option of the same weight dtype on the same GPU type (with ``SearchSpace.mixed_pools``, on any
GPU type of the same vendor: prefill on compute-rich cards, decode on bandwidth-rich ones) and keeps
its cheapest prefill pool; NVLink transfer needs both workers in one node of one GPU type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.cost import monthly_usd, usd_per_million_tokens
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel, decode_bound
from gpuplan.core.perf.kv_transfer import kv_transfer_s
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.scenarios import mean_context
from gpuplan.core.recommend.prefill_pool import PrefillOption, prefill_options
from gpuplan.core.recommend.request import (
    GpuOffer,
    MemoryBreakdownGib,
    Plan,
    PoolPlan,
    Rejection,
    SearchSpace,
    memory_in_use_gib,
)
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S
from gpuplan.core.workload import Workload

FIRST_TOKEN_DECODE_STEPS = 1.5
"""Decode steps between a prompt's KV arriving and its first token: half a step waiting for the step
in progress (the worker is busy), one step that emits it."""
BISECTION_STEPS = 12
FIXED_POINT_ITERATIONS = 40


@dataclass(frozen=True)
class DecodeOption:
    """One decode worker layout on one GPU type, sized for the target."""

    offer: GpuOffer
    layout: Layout
    replica: ReplicaModel
    running: float
    tpot_s: float
    capacity: float

    @property
    def usd_per_hour(self) -> float:
        return (self.offer.usd_per_gpu_hour or math.inf) * self.layout.num_gpus


def decode_options(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    layouts: dict[str, list[Layout]],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> Iterator[DecodeOption | Rejection]:
    """Every decode layout that meets the TPOT limit, with its workers for the target; for a GPU type
    with none, why (its layouts do not hold the context, or miss TPOT even at batch 1)."""
    for offer in offers:
        fits = False
        found = False
        for layout in layouts[offer.gpu.id]:
            option = _decode_option(model, offer, layout, target, sla, space, cal)
            fits = fits or option != "memory"
            if isinstance(option, DecodeOption):
                found = True
                yield option
        if not found:
            kind = "latency" if fits else "memory"
            reason = _NO_DECODE_TPOT.format(tpot=sla.tpot_ms) if fits else _NO_DECODE_MEMORY
            yield Rejection(gpu=offer.gpu.id, kind=kind, reason=reason)


def _decode_option(
    model: ModelSpec,
    offer: GpuOffer,
    layout: Layout,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> DecodeOption | Literal["memory", "latency"]:
    """The option of one decode layout, or why it has none."""
    context = target.input_tokens + target.output_tokens
    try:
        replica = ReplicaModel.build(
            model, offer.gpu, layout.with_replicas(1), context_tokens=context, cal=cal
        )
    except InfeasibleError:
        return "memory"
    step, ctx = replica.step, mean_context(target)
    cap = replica.capacity(target)
    batch = _largest_batch(lambda n: step.decode_s(batch=n, context=ctx), cap, sla.tpot_ms)
    if batch < 1.0:
        return "latency"
    per_worker_rps = batch / (target.output_tokens * step.decode_s(batch=batch, context=ctx))
    workers = max(math.ceil((target.rate_rps or 0.0) / (per_worker_rps * space.headroom)), 1)
    return decode_at(offer, layout, replica, workers, target)


def decode_at(
    offer: GpuOffer, layout: Layout, replica: ReplicaModel, workers: int, target: Workload
) -> DecodeOption:
    """The decode pool of ``workers`` workers of ``layout`` carrying the target: each runs the batch
    N = (λ / W_d) · output · t_decode(N) (module docstring)."""
    step, ctx = replica.step, mean_context(target)
    tokens_per_s = (target.rate_rps or 0.0) / workers * target.output_tokens
    running = _running(lambda n: step.decode_s(batch=n, context=ctx), tokens_per_s)
    tpot = step.decode_s(batch=running, context=ctx)
    return DecodeOption(
        offer, layout.with_replicas(workers), replica, running, tpot, replica.capacity(target)
    )


def _largest_batch(step_s: Callable[[float], float], cap: float, tpot_ms: float | None) -> float:
    """Largest batch in [1, cap] whose step meets ``tpot_ms`` (bisection); 0 if even one misses."""
    if tpot_ms is None:
        return cap
    limit = tpot_ms / MS_PER_S
    if step_s(1.0) > limit:
        return 0.0
    if step_s(cap) <= limit:
        return cap
    lo, hi = 1.0, cap
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step_s(mid) <= limit else (lo, mid)
    return lo


def _running(step_s: Callable[[float], float], tokens_per_s: float) -> float:
    """The batch N = tokens/s · t_step(N) (Little's law over decode steps), iterated from N = 1."""
    running = 1.0
    for _ in range(FIXED_POINT_ITERATIONS):
        new = max(tokens_per_s * step_s(running), 1.0)
        if abs(new - running) < 1e-4 * running:
            return new
        running = new
    return running


@dataclass(frozen=True)
class Pairing:
    """A decode option with its cheapest prefill pool."""

    decode: DecodeOption
    prefill: PrefillOption
    prefill_workers: int
    utilisation: float
    transfer_s: float
    ttft_s: float

    @property
    def num_gpus(self) -> int:
        return self.decode.layout.num_gpus + self.prefill_workers * self.prefill.layout.gpus_per_replica


def pair(
    model: ModelSpec,
    decode: DecodeOption,
    prefills: Sequence[PrefillOption],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
) -> Pairing | None:
    """The cheapest prefill pool that meets the TTFT limit beside ``decode`` (module docstring)."""
    best: Pairing | None = None
    for option in prefills:
        if option.layout.weight_dtype != decode.layout.weight_dtype or not _reachable(option, decode, space):
            continue
        found = _pairing(model, decode, option, target, sla, space)
        if found is not None and (best is None or _cost(found) < _cost(best)):
            best = found
    return best


def _reachable(prefill: PrefillOption, decode: DecodeOption, space: SearchSpace) -> bool:
    """The cache moves between GPUs of one vendor (NIXL/UCX and Mooncake register CUDA or ROCm memory,
    not a mix), between GPU types only when ``space.mixed_pools`` allows; NVLink carries it only between
    workers of one GPU type inside one node."""
    same_type = prefill.offer.gpu.id == decode.offer.gpu.id
    if not (same_type or (space.mixed_pools and prefill.offer.gpu.vendor == decode.offer.gpu.vendor)):
        return False
    if space.kv_transport.kind != "nvlink":
        return True
    same = prefill.offer.gpu.id == decode.offer.gpu.id
    node = decode.offer.gpu.interconnect.scale_up_domain_gpus
    return same and prefill.layout.gpus_per_replica + decode.layout.gpus_per_replica <= node


def _pairing(
    model: ModelSpec,
    decode: DecodeOption,
    prefill: PrefillOption,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
) -> Pairing | None:
    transfer = transfer_s(model, decode, prefill, target, space)
    fixed = prefill.alone_s + transfer + FIRST_TOKEN_DECODE_STEPS * decode.tpot_s
    utilisation = space.headroom
    if sla.ttft_ms is not None:
        wait = sla.ttft_ms / MS_PER_S - fixed
        if wait <= 0:
            return None
        utilisation = min(utilisation, 2 * wait / (prefill.busy_s + 2 * wait))
    workers = max(math.ceil((target.rate_rps or 0.0) * prefill.busy_s / utilisation), 1)
    return paired_at(decode, prefill, workers, transfer, target)


def transfer_s(
    model: ModelSpec, decode: DecodeOption, prefill: PrefillOption, target: Workload, space: SearchSpace
) -> float:
    """Exposed seconds of one prompt's KV transfer between the two workers (``kv_transfer.py``)."""
    return kv_transfer_s(
        model=model,
        transport=space.kv_transport,
        prefill=(prefill.offer.gpu, prefill.layout),
        decode=(decode.offer.gpu, decode.layout),
        prompt_tokens=target.input_tokens,
        prefill_s=prefill.alone_s,
    )


def paired_at(
    decode: DecodeOption, prefill: PrefillOption, workers: int, transfer_s: float, target: Workload
) -> Pairing:
    """``workers`` prefill workers beside ``decode``: M/D/1 queue, TTFT (infinite at ρ ≥ 1)."""
    rho = (target.rate_rps or 0.0) * prefill.busy_s / workers
    queue = rho * prefill.busy_s / (2 * (1 - rho)) if rho < 1 else math.inf
    fixed = prefill.alone_s + transfer_s + FIRST_TOKEN_DECODE_STEPS * decode.tpot_s
    return Pairing(decode, prefill, workers, rho, transfer_s, fixed + queue)


def _cost(p: Pairing) -> tuple[float, int]:
    per_hour = (
        (p.prefill.offer.usd_per_gpu_hour or math.inf) * p.prefill_workers * p.prefill.layout.gpus_per_replica
    )
    return per_hour + p.decode.usd_per_hour, p.num_gpus


def disaggregated_plan(p: Pairing, target: Workload, cal: Calibration) -> Plan:
    """The plan of a pairing: the decode pool is its layout (``gpu``, flat keys), both pools priced."""
    d, pre = p.decode, p.prefill
    prefill_layout = pre.layout.with_replicas(p.prefill_workers)
    pools = (
        PoolPlan.of(
            pre.offer.gpu.id,
            prefill_layout,
            usd_per_gpu_hour=pre.offer.usd_per_gpu_hour,
            busy_share=p.utilisation,
        ),
        PoolPlan.of(
            d.offer.gpu.id,
            d.layout,
            usd_per_gpu_hour=d.offer.usd_per_gpu_hour,
            busy_share=d.running / d.capacity,
        ),
    )
    prices = [pool.usd_per_hour for pool in pools]
    per_hour = None if None in prices else sum(x for x in prices if x is not None)
    rate = target.rate_rps or 0.0
    tokens_per_s = rate * target.output_tokens
    context = target.input_tokens + target.output_tokens
    return Plan(
        gpu=d.offer.gpu.id,
        layout=d.layout,
        layout_kind="disaggregated",
        prefill=pools[0],
        decode=pools[1],
        kv_transfer_ms=p.transfer_s * MS_PER_S,
        concurrency_per_replica=d.running,
        ttft_ms=p.ttft_s * MS_PER_S,
        tpot_ms=d.tpot_s * MS_PER_S,
        output_tokens_per_s=tokens_per_s,
        requests_per_s=rate,
        usd_per_hour=per_hour,
        usd_per_month=monthly_usd(usd_per_hour=per_hour) if per_hour else None,
        usd_per_million_output_tokens=usd_per_million_tokens(usd_per_hour=per_hour, tokens_per_s=tokens_per_s)
        if per_hour
        else None,
        memory_per_gpu_gib=memory_in_use_gib(
            d.replica.memory, running=d.running / d.layout.attention_dp, context_tokens=context
        ),
        memory_breakdown_gib=MemoryBreakdownGib.of(d.replica.memory),
        bound=decode_bound(d.replica.step, d.running),
        price_source=d.offer.price_source,
        price_quote=d.offer.price_quote,
        calibrated=cal.is_fitted(d.offer.gpu.family) and cal.is_fitted(pre.offer.gpu.family),
    )


def disaggregated_plans(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    layouts: dict[str, list[Layout]],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> tuple[list[Plan], list[Rejection]]:
    """Every decode option's plan with its cheapest prefill pool within ``space.max_gpus``, and for
    each GPU type with none as the decode pool, why."""
    prefills: dict[tuple[str, str], list[PrefillOption]] = {}  # by the pairs ``pair`` admits (1.6x faster)
    for option in prefill_options(model, offers, layouts, target, cal):
        prefills.setdefault(_pairs_with(option.offer, option.layout, space), []).append(option)
    plans: list[Plan] = []
    why: dict[str, Rejection] = {}
    for decode in decode_options(model, offers, layouts, target, sla, space, cal):
        if isinstance(decode, Rejection):
            why[decode.gpu] = decode
            continue
        gpu = decode.offer.gpu.id
        near = prefills.get(_pairs_with(decode.offer, decode.layout, space), [])
        found = pair(model, decode, near, target, sla, space)
        if found is None:
            why[gpu] = Rejection(gpu=gpu, kind="latency", reason=_NO_PREFILL.format(ttft=sla.ttft_ms))
        elif found.num_gpus > space.max_gpus:
            reason = f"disaggregated: needs {found.num_gpus} GPUs > max {space.max_gpus}"
            why[gpu] = Rejection(gpu=gpu, kind="count", reason=reason)
        else:
            plans.append(disaggregated_plan(found, target, cal))
    done = {p.gpu for p in plans}
    return plans, [r for g, r in why.items() if g not in done]


def _pairs_with(offer: GpuOffer, layout: Layout, space: SearchSpace) -> tuple[str, str]:
    """Workers that may pair share this: the GPU type (its vendor with mixed pools) and weight dtype."""
    return (offer.gpu.vendor if space.mixed_pools else offer.gpu.id), layout.weight_dtype.name


_NO_DECODE_TPOT = "disaggregated: no decode layout meets TPOT {tpot} ms even at batch 1"
_NO_DECODE_MEMORY = "disaggregated: no decode layout holds the weights and one request's KV cache"
_NO_PREFILL = (
    "disaggregated: no prefill pool meets TTFT {ttft} ms after the KV transfer and first decode step"
)

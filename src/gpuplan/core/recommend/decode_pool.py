"""The decode pool of a disaggregated plan (``prefill_pool.py`` sizes the other; ``disaggregated.py``
pairs them).

**Decode pool.** A decode worker runs decode steps only (no prompt chunks in its steps). For every
GPU type and layout that holds the whole context, the largest batch N whose step meets the TPOT
limit (bisection: the step grows with N), capped by the KV and engine capacity, sets what one worker
carries: λ_d = N / (output · t_decode(N)) requests/s (Little's law over the answer's decode steps).
The pool has W_d = ⌈λ / (headroom · λ_d)⌉ workers; at the target each runs the batch N that solves
N = (λ / W_d) · output · t_decode(N) (plain iteration from N = 1 climbs to it), and TPOT = t_decode(N).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.scenarios import mean_context
from gpuplan.core.recommend.request import GpuOffer, Rejection, SearchSpace
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S
from gpuplan.core.workload import Workload

__all__ = [
    "BISECTION_STEPS",
    "FIXED_POINT_ITERATIONS",
    "DecodeOption",
    "decode_at",
    "decode_options",
]

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

    @property
    def ranks(self) -> int:
        """Decode ranks taking requests independently, each over its own GPUs' links."""
        return self.layout.replicas * self.layout.attention_dp


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


_NO_DECODE_TPOT = "disaggregated: no decode layout meets TPOT {tpot} ms even at batch 1"
_NO_DECODE_MEMORY = "disaggregated: no decode layout holds the weights and one request's KV cache"

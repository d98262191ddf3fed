"""Prefill workers of a disaggregated plan: per prompt, the share of a worker's time it takes and
its own time alone (``disaggregated.py`` queues them as M/D/1)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.scenarios import lone_prefill_s, prefill_share_s
from gpuplan.core.recommend.request import GpuOffer
from gpuplan.core.workload import Workload


@dataclass(frozen=True)
class PrefillOption:
    """One prefill worker layout on one GPU type: its busy time per prompt and a lone prompt's time."""

    offer: GpuOffer
    layout: Layout
    busy_s: float
    alone_s: float


def prefill_options(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    layouts: dict[str, list[Layout]],
    target: Workload,
    cal: Calibration,
) -> Iterator[PrefillOption]:
    """Every prefill layout that holds one prompt, with its per-prompt times."""
    for offer in offers:
        for layout in layouts[offer.gpu.id]:
            option = prefill_option(model, offer, layout, target, cal)
            if option is not None:
                yield option


def prefill_option(
    model: ModelSpec, offer: GpuOffer, layout: Layout, target: Workload, cal: Calibration
) -> PrefillOption | None:
    """One prefill layout's per-prompt times; None when it does not hold one prompt."""
    try:
        replica = ReplicaModel.build(
            model, offer.gpu, layout.with_replicas(1), context_tokens=target.input_tokens + 1, cal=cal
        )
    except InfeasibleError:
        return None
    step = replica.step
    packed = math.ceil(step.prefill_step_tokens / max(target.input_tokens, 1))
    prompt = target.model_copy(update={"output_tokens": 1})
    busy = prefill_share_s(step, replica.memory, prompt, float(packed))
    alone_s = lone_prefill_s(step, target) + step.first_token_host_s  # cached prefix skipped; host time first
    return PrefillOption(offer, layout, busy, alone_s)

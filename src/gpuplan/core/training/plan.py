"""Time, GPU-hours, cost and energy to train a token budget on one plan (pure arithmetic).

wall_s      = tokens / tokens_per_s
gpu_hours   = wall_s / 3600 × gpus
usd         = gpu_hours × usd_per_gpu_hour           (per price kind)
energy_kwh  = gpu_hours × TDP_kW × utilisation × PUE  (cost.py defaults, facility included)
"""

from __future__ import annotations

from gpuplan.core.cost import DEFAULT_PUE, DEFAULT_UTILISATION
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.units import S_PER_HOUR, W_PER_KW


class TrainingCost(FrozenModel):
    wall_hours: float
    gpu_hours: float
    usd_by_price_kind: dict[str, float]
    energy_kwh: float | None


def training_cost(
    *,
    tokens: float,
    tokens_per_s: float,
    gpus: int,
    usd_per_gpu_hour: dict[str, float],
    tdp_watts: float | None,
) -> TrainingCost:
    """Wall time, GPU-hours, dollars per price kind and energy to train ``tokens`` tokens."""
    wall_h = tokens / tokens_per_s / S_PER_HOUR
    gpu_h = wall_h * gpus
    energy = None if tdp_watts is None else gpu_h * tdp_watts / W_PER_KW * DEFAULT_UTILISATION * DEFAULT_PUE
    return TrainingCost(
        wall_hours=wall_h,
        gpu_hours=gpu_h,
        usd_by_price_kind={kind: gpu_h * usd for kind, usd in usd_per_gpu_hour.items()},
        energy_kwh=energy,
    )

"""Cost arithmetic: $/hour of a plan, owned TCO, $/1M tokens, monthly cost, rent-vs-buy break-even.

Pure functions over numbers (prices come from the catalog via the caller). Formulas:

* cloud: usd_per_hour = usd_per_gpu_hour × gpus
* owned: usd_per_hour = purchase × (1 + server_overhead) / (years × 8760 h)
  + tdp_kW × utilisation × PUE × usd_per_kWh  (+ nothing for staff: say so in reports)
* usd_per_million_tokens = usd_per_hour / (tokens_per_s × 3600) × 1e6
* break-even months = purchase × (1 + server_overhead) / ((cloud − owned opex) × 730 h × utilisation)
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.units import HOURS_PER_MONTH, HOURS_PER_YEAR, MILLION, S_PER_HOUR, W_PER_KW

DEFAULT_AMORTISATION_YEARS = 3.0
"""Typical depreciation schedule for data-centre GPUs (3-5 years; 3 is conservative)."""
DEFAULT_PUE = 1.3
"""Power usage effectiveness of a modern colocation site (Uptime Institute 2023 survey average 1.58;
new GPU halls 1.2-1.4)."""
DEFAULT_USD_PER_KWH = 0.12
"""US commercial electricity average 2024 (EIA Electric Power Monthly table 5.6.A: ~12.7 ¢/kWh)."""
DEFAULT_UTILISATION = 0.7
"""Average GPU power draw as a share of TDP over a month for a busy inference/training fleet."""
DEFAULT_SERVER_OVERHEAD = 0.35
"""Host, networking and rack cost on top of the GPU price (an 8-GPU HGX server adds ~30-40 %)."""


class OwnershipAssumptions(FrozenModel):
    """Inputs of the owned-TCO model; every field can be overridden by the user (scenario section
    ``ownership:``, docs/scenarios.md)."""

    amortisation_years: float = Field(default=DEFAULT_AMORTISATION_YEARS, gt=0, le=20)
    pue: float = Field(default=DEFAULT_PUE, ge=1, le=3)
    usd_per_kwh: float = Field(default=DEFAULT_USD_PER_KWH, ge=0, le=10)
    utilisation: float = Field(default=DEFAULT_UTILISATION, gt=0, le=1)
    server_overhead: float = Field(default=DEFAULT_SERVER_OVERHEAD, ge=0, le=5)


def cloud_usd_per_hour(*, usd_per_gpu_hour: float, gpus: int) -> float:
    """Rented cost of ``gpus`` GPUs for one hour."""
    return usd_per_gpu_hour * gpus


def power_usd_per_hour(*, tdp_watts: float, gpus: int, a: OwnershipAssumptions) -> float:
    """Electricity for ``gpus`` GPUs at ``a.utilisation`` of TDP, facility overhead included."""
    return tdp_watts / W_PER_KW * a.utilisation * a.pue * a.usd_per_kwh * gpus


def owned_usd_per_hour(*, purchase_usd: float, tdp_watts: float, gpus: int, a: OwnershipAssumptions) -> float:
    """Owned cost per hour: straight-line amortisation of GPU + server share, plus power."""
    capex = purchase_usd * (1 + a.server_overhead) / (a.amortisation_years * HOURS_PER_YEAR) * gpus
    return capex + power_usd_per_hour(tdp_watts=tdp_watts, gpus=gpus, a=a)


def usd_per_million_tokens(*, usd_per_hour: float, tokens_per_s: float) -> float:
    """Dollars per million tokens at a sustained rate; inf when nothing is produced."""
    if tokens_per_s <= 0:
        return math.inf
    return usd_per_hour / (tokens_per_s * S_PER_HOUR) * MILLION


def monthly_usd(*, usd_per_hour: float, hours_per_month: float = HOURS_PER_MONTH) -> float:
    """Cost of running all month (730 h)."""
    return usd_per_hour * hours_per_month


def break_even_months(
    *, purchase_usd: float, cloud_usd_per_gpu_hour: float, tdp_watts: float, a: OwnershipAssumptions
) -> float:
    """Months of renting that pay for buying one GPU (with its server share); inf if never.

    Renting is compared at the same utilisation: per calendar hour a rented GPU is billed for
    ``utilisation`` hours, and an owned one draws power for the same share
    (``power_usd_per_hour`` already counts the utilisation once).
    """
    rent = cloud_usd_per_gpu_hour * a.utilisation
    saving = rent - power_usd_per_hour(tdp_watts=tdp_watts, gpus=1, a=a)
    if saving <= 0:
        return math.inf
    return purchase_usd * (1 + a.server_overhead) / (saving * HOURS_PER_MONTH)

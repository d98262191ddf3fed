"""Rent vs buy for a number of GPUs: monthly cost of each, the month buying breaks even, and the totals
over the amortisation period (``gpuplan tco``).

Per month (730 h), for ``gpus`` GPUs, with the assumptions of :class:`~gpuplan.core.cost.OwnershipAssumptions`:

* rent  = usd_per_gpu_hour × utilisation × 730 × gpus   (a rented GPU is billed for the hours it is used)
* power = TDP kW × utilisation × PUE × usd_per_kWh × 730 × gpus
* own opex = power + staff_usd_per_month
* upfront = purchase_usd × (1 + server_overhead) × gpus
* break-even month = upfront / (rent − own opex)          (never when renting costs no more than the opex)
* over ``amortisation_years``: rent_total = rent × months; own_total = upfront × (1 − resale_share) + opex × months

Pure functions, keyword-only; prices come in as arguments.
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuplan.core.cost import OwnershipAssumptions, power_usd_per_hour
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT
from gpuplan.core.units import HOURS_PER_MONTH

MONTHS_PER_YEAR = 12


class TcoInputs(FrozenModel):
    """One rent-vs-buy question: the GPUs, their prices and the ownership assumptions."""

    gpu: str
    gpus: int = Field(ge=1, le=MAX_GPU_COUNT)
    rent_usd_per_gpu_hour: float = Field(gt=0)
    purchase_usd_per_gpu: float = Field(gt=0)
    tdp_watts: float = Field(gt=0)
    ownership: OwnershipAssumptions = OwnershipAssumptions()
    resale_share: float = Field(
        default=0.0, ge=0, lt=1, description="share of the purchase recovered at the end"
    )
    staff_usd_per_month: float = Field(default=0.0, ge=0, description="operations staff share, per month")


class TcoResult(FrozenModel):
    """The answer: monthly costs, break-even month, totals over the amortisation period."""

    gpu: str
    gpus: int
    rent_usd_per_month: float
    power_usd_per_month: float
    own_opex_usd_per_month: float = Field(description="power + staff")
    upfront_usd: float = Field(description="GPUs and their server share, paid on day one")
    break_even_months: float | None = Field(description="months of renting that pay for buying; null: never")
    horizon_months: float = Field(description="the amortisation period, months")
    rent_total_usd: float
    own_total_usd: float = Field(description="upfront − resale + opex over the horizon")
    cheaper: str = Field(description="rent or own, over the horizon")


def rent_vs_buy(*, inputs: TcoInputs) -> TcoResult:
    """Monthly rent and ownership costs of ``inputs.gpus`` GPUs and when buying breaks even."""
    a = inputs.ownership
    n = inputs.gpus
    rent = inputs.rent_usd_per_gpu_hour * a.utilisation * HOURS_PER_MONTH * n
    power = power_usd_per_hour(tdp_watts=inputs.tdp_watts, gpus=n, a=a) * HOURS_PER_MONTH
    opex = power + inputs.staff_usd_per_month
    upfront = inputs.purchase_usd_per_gpu * (1 + a.server_overhead) * n
    saving = rent - opex
    months = upfront / saving if saving > 0 else math.inf
    horizon = a.amortisation_years * MONTHS_PER_YEAR
    rent_total = rent * horizon
    own_total = upfront * (1 - inputs.resale_share) + opex * horizon
    return TcoResult(
        gpu=inputs.gpu,
        gpus=n,
        rent_usd_per_month=rent,
        power_usd_per_month=power,
        own_opex_usd_per_month=opex,
        upfront_usd=upfront,
        break_even_months=months if math.isfinite(months) else None,
        horizon_months=horizon,
        rent_total_usd=rent_total,
        own_total_usd=own_total,
        cheaper="own" if own_total < rent_total else "rent",
    )


class CostPoint(FrozenModel):
    """Money spent by the end of one month, renting and owning."""

    month: int
    rent_usd: float
    own_usd: float


def cumulative_costs(*, result: TcoResult, resale_share: float) -> list[CostPoint]:
    """Month 0 to the horizon: rent accrues monthly; owning pays the upfront on day one, then its
    opex, and recovers ``resale_share`` of the GPUs' purchase in the last month. The curves cross at
    ``result.break_even_months`` (before the resale)."""
    months = math.ceil(result.horizon_months)
    points = []
    for m in range(months + 1):
        resale = resale_share * result.upfront_usd if m == months and m > 0 else 0.0
        points.append(
            CostPoint(
                month=m,
                rent_usd=result.rent_usd_per_month * m,
                own_usd=result.upfront_usd + result.own_opex_usd_per_month * m - resale,
            )
        )
    return points

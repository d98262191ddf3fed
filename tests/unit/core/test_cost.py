"""Cost arithmetic checked by hand: rent, own, $/1M tokens, monthly, break-even."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from gpuplan.core.cost import (
    OwnershipAssumptions,
    break_even_months,
    cloud_usd_per_hour,
    monthly_usd,
    owned_usd_per_hour,
    power_usd_per_hour,
    usd_per_million_tokens,
)

DEFAULTS = OwnershipAssumptions()


def test_default_assumptions() -> None:
    assert (
        DEFAULTS.amortisation_years,
        DEFAULTS.pue,
        DEFAULTS.usd_per_kwh,
        DEFAULTS.utilisation,
        DEFAULTS.server_overhead,
    ) == (3.0, 1.3, 0.12, 0.7, 0.35)


@pytest.mark.parametrize("gpus", [1, 2, 8, 64])
def test_cloud_cost_is_linear_in_gpus(gpus: int) -> None:
    # 2.50 $/GPU-h x n GPUs.
    assert cloud_usd_per_hour(usd_per_gpu_hour=2.5, gpus=gpus) == pytest.approx(2.5 * gpus)


def test_usd_per_million_tokens_reference_point() -> None:
    # $3.6/h at 1000 tok/s: 3.6M tokens per hour cost $3.6 -> $1.00 per 1M tokens.
    assert usd_per_million_tokens(usd_per_hour=3.6, tokens_per_s=1000) == pytest.approx(1.0)
    # $10/h at 250 tok/s: 0.9M tokens per hour -> 10 / 0.9 = $11.11 per 1M.
    assert usd_per_million_tokens(usd_per_hour=10.0, tokens_per_s=250) == pytest.approx(10 / 0.9)


@pytest.mark.parametrize("tokens_per_s", [0.0, -5.0])
def test_usd_per_million_tokens_is_inf_without_output(tokens_per_s: float) -> None:
    assert usd_per_million_tokens(usd_per_hour=3.6, tokens_per_s=tokens_per_s) == math.inf


def test_monthly_is_730_hours() -> None:
    # 8760 h / 12 = 730 h; $2/h -> $1460/month.
    assert monthly_usd(usd_per_hour=2.0) == pytest.approx(1460.0)
    assert monthly_usd(usd_per_hour=2.0, hours_per_month=100) == pytest.approx(200.0)


def test_power_cost_by_hand() -> None:
    # 700 W = 0.7 kW x 0.7 utilisation x 1.3 PUE x $0.12/kWh = $0.07644 per GPU-hour.
    assert power_usd_per_hour(tdp_watts=700, gpus=1, a=DEFAULTS) == pytest.approx(0.07644)
    assert power_usd_per_hour(tdp_watts=700, gpus=8, a=DEFAULTS) == pytest.approx(8 * 0.07644)


def test_owned_cost_by_hand_defaults() -> None:
    # Capex: $27,500 x 1.35 = $37,125 over 3 x 8760 = 26,280 h = $1.412671/h; power $0.07644/h.
    capex = 37_125 / 26_280
    expected = capex + 0.07644
    assert expected == pytest.approx(1.489111, rel=1e-6)
    assert owned_usd_per_hour(purchase_usd=27_500, tdp_watts=700, gpus=1, a=DEFAULTS) == pytest.approx(
        expected
    )
    assert owned_usd_per_hour(purchase_usd=27_500, tdp_watts=700, gpus=8, a=DEFAULTS) == pytest.approx(
        8 * expected
    )


def test_owned_cost_by_hand_custom_assumptions() -> None:
    a = OwnershipAssumptions(
        amortisation_years=5, pue=1.5, usd_per_kwh=0.2, utilisation=0.5, server_overhead=0
    )
    # Capex $10,000 / (5 x 8760 h) = $0.228311/h; power 1.0 kW x 0.5 x 1.5 x $0.2 = $0.15/h.
    expected = 10_000 / 43_800 + 0.15
    assert owned_usd_per_hour(purchase_usd=10_000, tdp_watts=1000, gpus=1, a=a) == pytest.approx(expected)


def test_break_even_months_by_hand() -> None:
    # Per calendar hour: rent 3.99 x 0.7 utilisation = 2.793 $/h, power at 70 % of 700 W = 0.07644 $/h
    # (utilisation counted once), saving 2.71656 $/h; purchase with server share = 27,500 x 1.35 =
    # 37,125 $; months = 37,125 / (2.71656 x 730) = 18.7210.
    months = break_even_months(purchase_usd=27_500, cloud_usd_per_gpu_hour=3.99, tdp_watts=700, a=DEFAULTS)
    assert months == pytest.approx(37_125 / ((3.99 * 0.7 - 0.07644) * 730))
    assert months == pytest.approx(18.7210, rel=1e-4)


def test_break_even_falls_as_cloud_price_rises() -> None:
    cheap = break_even_months(purchase_usd=27_500, cloud_usd_per_gpu_hour=2.0, tdp_watts=700, a=DEFAULTS)
    dear = break_even_months(purchase_usd=27_500, cloud_usd_per_gpu_hour=8.0, tdp_watts=700, a=DEFAULTS)
    assert dear < cheap


@pytest.mark.parametrize("cloud", [0.01, 0.05, 0.109])
def test_break_even_is_inf_when_cloud_is_not_dearer_than_power(cloud: float) -> None:
    # Power costs $0.07644 per calendar hour (700 W at 70 %); the rent saved is 0.7 x cloud, so
    # renting at or below 0.07644 / 0.7 = $0.1092/h never pays for a purchase.
    assert (
        break_even_months(purchase_usd=27_500, cloud_usd_per_gpu_hour=cloud, tdp_watts=700, a=DEFAULTS)
        == math.inf
    )


@pytest.mark.parametrize(
    "field",
    [
        {"amortisation_years": 0},
        {"pue": 0.9},
        {"utilisation": 0},
        {"utilisation": 1.5},
        {"usd_per_kwh": -1},
        {"server_overhead": -0.1},
        {"unknown": 1},
    ],
)
def test_assumptions_validate(field: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        OwnershipAssumptions(**field)

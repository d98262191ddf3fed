"""gpuplan.core.sla: one set of latency limits, bounded and finite, and what it reports about itself."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, ValidatorFunctionWrapHandler, field_validator

from gpuplan.core.sla import (
    MAX_E2E_MS,
    MAX_TPOT_MS,
    MAX_TTFT_MS,
    MEAN_LIMITS,
    P99_LIMITS,
    Sla,
    refuse_unchecked,
)


def test_empty_sla_has_no_limits() -> None:
    sla = Sla()
    assert sla.empty and sla.given == ()
    assert not sla.has_means and not sla.has_percentiles


@pytest.mark.parametrize(
    ("limits", "means", "percentiles"),
    [
        ({"ttft_ms": 1000}, True, False),
        ({"tpot_ms": 50}, True, False),
        ({"ttft_p99_ms": 2000}, False, True),
        ({"tpot_p99_ms": 80}, False, True),
        ({"e2e_p99_ms": 9000}, False, True),
        ({"tpot_ms": 50, "ttft_p99_ms": 2000}, True, True),
    ],
)
def test_means_and_percentiles_are_told_apart(
    limits: dict[str, float], means: bool, percentiles: bool
) -> None:
    sla = Sla(**limits)
    assert (sla.has_means, sla.has_percentiles, sla.empty) == (means, percentiles, False)
    assert set(sla.given) == set(limits)


def test_given_follows_field_order() -> None:
    everything = Sla(e2e_p99_ms=5, tpot_p99_ms=4, ttft_p99_ms=3, tpot_ms=2, ttft_ms=1)
    assert everything.given == (*MEAN_LIMITS, *P99_LIMITS)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ttft_ms", 0, "greater than 0"),
        ("tpot_p99_ms", -1, "greater than 0"),
        ("e2e_p99_ms", 0, "greater than 0"),
        ("ttft_ms", MAX_TTFT_MS + 1, "less than or equal to 3600000"),
        ("ttft_p99_ms", MAX_TTFT_MS + 1, "less than or equal to 3600000"),
        ("tpot_ms", MAX_TPOT_MS + 1, "less than or equal to 600000"),
        ("tpot_p99_ms", MAX_TPOT_MS + 1, "less than or equal to 600000"),
        ("e2e_p99_ms", MAX_E2E_MS + 1, "less than or equal to 86400000"),
        ("e2e_p99_ms", math.inf, "finite number"),
        ("ttft_ms", math.nan, "finite number"),
        ("tpot_ms", True, "expected a number, got a boolean"),
    ],
)
def test_out_of_range_limits_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Sla.model_validate({field: value})


def test_the_caps_themselves_and_unknown_keys() -> None:
    assert Sla(ttft_ms=MAX_TTFT_MS, tpot_p99_ms=MAX_TPOT_MS, e2e_p99_ms=MAX_E2E_MS).given == (
        "ttft_ms",
        "tpot_p99_ms",
        "e2e_p99_ms",
    )
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Sla.model_validate({"ttft_p95_ms": 100})


def test_sla_is_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        Sla().ttft_ms = 5.0  # type: ignore[misc]


def test_as_recorded_keeps_limits_above_the_caps_and_checks_the_rest() -> None:
    recorded = Sla.as_recorded(ttft_p99_ms=5_000_000.0, tpot_p99_ms=700_000.0)
    assert (recorded.ttft_p99_ms, recorded.tpot_p99_ms) == (5_000_000.0, 700_000.0)
    assert Sla.as_recorded(ttft_p99_ms=500.0, tpot_p99_ms=None) == Sla(ttft_p99_ms=500.0)
    with pytest.raises(ValidationError, match="greater than 0"):
        Sla.as_recorded(ttft_p99_ms=-1.0)
    with pytest.raises(ValidationError, match="finite number"):
        Sla.as_recorded(tpot_p99_ms=math.nan)


class _P99Section(BaseModel):
    """A document section that checks only the P99 limits, as simulate's ``slo:``."""

    slo: Sla = Sla()

    @field_validator("slo", mode="wrap")
    @classmethod
    def _p99s(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Sla:
        return refuse_unchecked(value, handler, P99_LIMITS)


def _errors(slo: object) -> list[tuple[tuple[object, ...], str, str]]:
    with pytest.raises(ValidationError) as caught:
        _P99Section.model_validate({"slo": slo})
    return [(e["loc"], e["type"], e["msg"]) for e in caught.value.errors()]


def test_refuse_unchecked_refuses_before_reading_the_value() -> None:
    assert _P99Section.model_validate({"slo": {"e2e_p99_ms": 9000}}).slo == Sla(e2e_p99_ms=9000)
    extra = ("extra_forbidden", "Extra inputs are not permitted")
    assert _errors({"ttft_ms": -5}) == [(("slo", "ttft_ms"), *extra)]
    assert _errors({"tpot_ms": "x", "ttft_p99_ms": 0, "foo": 1}) == [
        (("slo", "ttft_p99_ms"), "greater_than", "Input should be greater than 0"),
        (("slo", "tpot_ms"), *extra),
        (("slo", "foo"), *extra),
    ]
    assert _errors(Sla(ttft_ms=5.0, ttft_p99_ms=1.0)) == [(("slo", "ttft_ms"), *extra)]
    assert _errors([1]) == [(("slo",), "model_type", "Input should be a valid dictionary or instance of Sla")]

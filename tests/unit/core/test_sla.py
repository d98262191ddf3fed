"""gpuplan.core.sla: one set of latency limits, bounded and finite, and what it reports about itself."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from gpuplan.core.sla import MAX_TPOT_MS, MAX_TTFT_MS, MEAN_LIMITS, P99_LIMITS, Sla


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
        ("e2e_p99_ms", math.inf, "finite number"),
        ("ttft_ms", math.nan, "finite number"),
        ("tpot_ms", True, "expected a number, got a boolean"),
    ],
)
def test_out_of_range_limits_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Sla.model_validate({field: value})


def test_the_caps_themselves_and_unknown_keys() -> None:
    assert Sla(ttft_ms=MAX_TTFT_MS, tpot_p99_ms=MAX_TPOT_MS).given == ("ttft_ms", "tpot_p99_ms")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Sla.model_validate({"ttft_p95_ms": 100})


def test_sla_is_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        Sla().ttft_ms = 5.0  # type: ignore[misc]


def test_only_names_the_limits_a_path_does_not_check() -> None:
    sla = Sla(ttft_ms=100, e2e_p99_ms=900)
    assert Sla(ttft_p99_ms=1).only(P99_LIMITS, "the simulator") == Sla(ttft_p99_ms=1)
    with pytest.raises(ValueError, match=r"^the simulator does not check ttft_ms \(only ttft_p99_ms"):
        sla.only(P99_LIMITS, "the simulator")
    with pytest.raises(ValueError, match=r"^recommend does not check e2e_p99_ms \(only ttft_ms, tpot_ms\)$"):
        sla.only(MEAN_LIMITS, "recommend")

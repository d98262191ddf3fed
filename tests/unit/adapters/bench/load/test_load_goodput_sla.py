"""A load test's goodput limits: flat ``slo_*_ms`` fields (the stored shape), read as a core ``Sla``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.core.sla import Sla

BASE: dict[str, object] = {
    "url": "http://127.0.0.1:1",
    "model": "m",
    "rate_rps": 10.0,
    "duration_s": 1.0,
    "input_tokens": 16,
    "output_tokens": 8,
}


def test_goodput_limits_are_per_request_p99_limits() -> None:
    config = LoadConfig.model_validate(BASE | {"slo_ttft_ms": 500.0, "slo_tpot_ms": 40.0})
    assert config.goodput_sla == Sla(ttft_p99_ms=500.0, tpot_p99_ms=40.0)
    assert LoadConfig.model_validate(BASE).goodput_sla.empty


def test_stored_shape_keeps_the_flat_fields() -> None:
    dumped = LoadConfig.model_validate(BASE | {"slo_ttft_ms": 500.0}).model_dump(mode="json")
    assert (dumped["slo_ttft_ms"], dumped["slo_tpot_ms"]) == (500.0, None)
    assert not {"sla", "goodput_sla"} & set(dumped)
    assert LoadConfig.model_validate(dumped).goodput_sla == Sla(ttft_p99_ms=500.0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("slo_ttft_ms", 0.0, "slo_ttft_ms\n  Input should be greater than 0"),
        ("slo_ttft_ms", 3_600_001.0, "slo_ttft_ms\n  Input should be less than or equal to 3600000"),
        ("slo_tpot_ms", 600_001.0, "slo_tpot_ms\n  Input should be less than or equal to 600000"),
    ],
)
def test_goodput_limits_have_the_sla_bounds(field: str, value: float, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LoadConfig.model_validate(BASE | {field: value})


def test_a_stored_config_keeps_goodput_limits_above_the_caps() -> None:
    """A run stored before the caps (--slo-ttft-ms 5000000) reads back, and judges goodput, as stored."""
    stored = LoadConfig.model_validate(BASE).model_dump(mode="json") | {
        "slo_ttft_ms": 5e6,
        "slo_tpot_ms": 7e5,
    }
    with pytest.raises(ValidationError, match="less than or equal to 3600000"):
        LoadConfig.model_validate(stored)
    config = LoadConfig.from_stored(stored)
    assert config.model_dump(mode="json") == stored
    assert (config.goodput_sla.ttft_p99_ms, config.goodput_sla.tpot_p99_ms) == (5e6, 7e5)
    with pytest.raises(ValidationError, match="greater than 0"):
        LoadConfig.from_stored(stored | {"slo_tpot_ms": 0.0})

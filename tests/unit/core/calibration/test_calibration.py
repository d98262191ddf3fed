"""Bundled calibration and priors: load, stay physical, carry provenance; bad data is refused."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml

from gpuplan.core.calibration.serving import Calibration, parse_calibration
from gpuplan.core.errors import DataError
from gpuplan.data.bundled_calibration import default_calibration, prior_calibration

BUNDLES = {"calibration": default_calibration, "priors": prior_calibration}
FRACTION_MAPS = ("compute_efficiency", "bandwidth_efficiency", "engine_efficiency")


@pytest.fixture(params=sorted(BUNDLES))
def cal(request: pytest.FixtureRequest) -> Calibration:
    return BUNDLES[request.param]()


def _raw() -> dict[str, Any]:
    return default_calibration().model_dump(mode="json")


def test_efficiency_factors_are_fractions(cal: Calibration) -> None:
    for name in FRACTION_MAPS:
        values = getattr(cal, name)
        assert "default" in values
        for key, value in values.items():
            assert 0 < value <= 1.0, f"{name}[{key}] = {value}"
    assert 0 < cal.link_efficiency <= 1.0
    assert 0 < cal.low_precision_compute_scale <= 1.0


def test_time_factors_are_small_and_positive(cal: Calibration) -> None:
    # Host overhead per step: a few ms at most; one ring hop: microseconds; per layer: tens of µs.
    for key, value in cal.step_overhead_s.items():
        assert 0 < value < 0.01, key
    for key, value in cal.hop_latency_s.items():
        assert 0 < value < 1e-4, key
    assert 0 <= cal.layer_overhead_s < 1e-3


def test_trtllm_is_the_engine_reference(cal: Calibration) -> None:
    assert cal.engine("trtllm") == 1.0
    assert cal.engine("vllm") < 1.0


def test_lookups_fall_back_to_default(cal: Calibration) -> None:
    assert cal.compute("no-such-family") == cal.compute_efficiency["default"]
    assert cal.bandwidth("no-such-family") == cal.bandwidth_efficiency["default"]
    assert cal.engine("no-such-engine") == cal.engine_efficiency["default"]
    assert cal.overhead("no-such-engine") == cal.step_overhead_s["default"]
    assert cal.hop_latency("carrier-pigeon") == cal.hop_latency_s["default"]
    assert cal.compute("hopper") == cal.compute_efficiency["hopper"]


def test_provenance(cal: Calibration) -> None:
    p = cal.provenance
    assert p.method and p.data and p.command and p.fitted_on
    assert p.rows >= 0


def test_bundled_fit_has_rows_and_priors_have_none() -> None:
    assert default_calibration().provenance.rows > 0
    assert "gpuplan validate" in default_calibration().provenance.command
    assert prior_calibration().provenance.rows == 0


def test_fit_stays_near_priors() -> None:
    fit, prior = default_calibration(), prior_calibration()
    for name in FRACTION_MAPS:
        for key, value in getattr(prior, name).items():
            assert getattr(fit, name)[key] == pytest.approx(value, rel=0.5), f"{name}[{key}]"


def test_roundtrip() -> None:
    assert parse_calibration(_raw(), origin="copy") == default_calibration()


@pytest.mark.parametrize(
    "field",
    ["compute_efficiency", "bandwidth_efficiency", "engine_efficiency", "step_overhead_s", "hop_latency_s"],
)
def test_missing_default_is_refused(field: str) -> None:
    raw = _raw()
    del raw[field]["default"]
    with pytest.raises(DataError) as info:
        parse_calibration(raw, origin="my.yaml")
    assert str(info.value) == f"my.yaml: {field} needs a 'default' entry"
    assert info.value.exit_code == 3


@pytest.mark.parametrize("field", ["link_efficiency", "low_precision_compute_scale", "layer_overhead_s"])
def test_negative_scalar_is_refused(field: str) -> None:
    raw = _raw()
    raw[field] = -0.5
    with pytest.raises(DataError) as info:
        parse_calibration(raw, origin="my.yaml")
    assert str(info.value).startswith(f"my.yaml: {field}: ")


def test_missing_field_is_refused() -> None:
    raw = _raw()
    del raw["provenance"]
    with pytest.raises(DataError, match=r"my\.yaml: provenance"):
        parse_calibration(raw, origin="my.yaml")


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(DataError, match=r"my\.yaml"):
        parse_calibration(["not", "a", "mapping"], origin="my.yaml")


@pytest.mark.parametrize("field", ["compute_efficiency", "bandwidth_efficiency", "engine_efficiency"])
def test_negative_efficiency_in_a_map_is_refused(field: str) -> None:
    raw = _raw()
    raw[field]["default"] = -0.5
    with pytest.raises(DataError) as info:
        parse_calibration(raw, origin="my.yaml")
    assert field in str(info.value)


def test_a_calibration_file_without_the_power_exponent_applies_no_cap() -> None:
    data = yaml.safe_load(
        resources.files("gpuplan.data").joinpath("calibration/calibration.yaml").read_text()
    )
    del data["power_limit_exponent"]
    assert parse_calibration(data, origin="old.yaml").power_limit_exponent == 0.0
    assert 1 / 3 <= default_calibration().power_limit_exponent <= 1.0  # fitted within the physical range

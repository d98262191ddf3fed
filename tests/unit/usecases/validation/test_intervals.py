"""A validation row's group in the error model, and the interval and coverage it gets."""

from __future__ import annotations

import pytest
from validation_row_factory import llama8b_row

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.core.calibration.error_model import (
    ENGINE_KNOWN,
    ENGINE_UNKNOWN,
    FITTED,
    NOT_FITTED,
    PRIOR,
    Residual,
    build_error_model,
)
from gpuplan.data.bundled_calibration import default_calibration, default_training_calibration
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.intervals import (
    IntervalRow,
    bundled_gpu_fitted,
    coverage_stats,
    metric_family,
    row_path,
    with_interval,
)
from gpuplan.usecases.validation.predict import RowResult


def _case(schema: str, metric: str, **fields: str) -> Case:
    return Case.model_validate(
        {"schema_name": schema, "id": "X1", "metric": metric, "value": 1.0, "quality": "A", "fields": fields}
    )


def _result(predicted: float | None, measured: float = 100.0, metric: str = "m") -> RowResult:
    return RowResult(
        id="X1", metric=metric, quality="A", gpu="H100-SXM", measured=measured, predicted=predicted,
        ape=None, skip_reason=None, regime="saturated",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "metric", "family", "fields"),
    [
        ("inference", "output_tokens_per_s", "throughput", {}),
        ("inference", "requests_per_s", "throughput", {}),
        ("inference", "ttft_ms_p99", "ttft", {}),
        ("inference", "tpot_ms_mean", "tpot", {}),
        ("inference", "itl_ms_p50", "itl", {}),
        ("inference", "e2e_ms_mean", "e2e", {}),
        ("inference_memory", "kv_cache_tokens", "inference memory", {}),
        ("inference_memory", "fits", None, {}),
        ("training", "step_time_s", "training speed", {}),
        ("memory", "peak_gib_per_gpu", "training memory", {"method": "lora"}),
        ("memory", "kv_cache_blocks", "inference memory", {"method": "inference"}),
    ],
)
def test_metric_family(schema: str, metric: str, family: str | None, fields: dict[str, str]) -> None:
    assert metric_family(_case(schema, metric, **fields)) == family


def test_row_path_broadest_first() -> None:
    case = llama8b_row("output_tokens_per_s")
    assert row_path(case, _result(1.0), gpu_fitted=True) == (
        "throughput", "saturated", FITTED, ENGINE_KNOWN, "output_tokens_per_s",
    )  # fmt: skip
    other = llama8b_row("output_tokens_per_s", framework="other")
    assert row_path(other, _result(1.0), gpu_fitted=False)[2:4] == (PRIOR, ENGINE_UNKNOWN)  # type: ignore[index]
    memory = _case("inference_memory", "weights_gib_per_gpu", framework="vllm")
    assert row_path(memory, _result(1.0), gpu_fitted=None)[2] == NOT_FITTED  # type: ignore[index]


def test_bundled_evidence_follows_the_fitted_families() -> None:
    catalog, cal, tcal = default_catalog(), default_calibration(), default_training_calibration()
    assert bundled_gpu_fitted(llama8b_row("output_tokens_per_s"), catalog, cal, tcal) is True  # hopper
    mi300x = llama8b_row("output_tokens_per_s", gpu="MI300X")  # cdna3: priors only
    assert bundled_gpu_fitted(mi300x, catalog, cal, tcal) is False
    assert bundled_gpu_fitted(_case("training", "step_time_s", gpu="H100-SXM"), catalog, cal, tcal) is True
    assert (
        bundled_gpu_fitted(_case("inference_memory", "kv_cache_tokens", gpu="H100-SXM"), catalog, cal, tcal)
        is None
    )


def test_interval_and_coverage_of_rows() -> None:
    # one group, residuals log(measured/predicted) of -0.1 and +0.1 on two GPUs
    model = build_error_model(
        residuals=[
            Residual(source="t", id=f"R{i}", gpu=f"G{i}", setup=f"G{i}", path=("throughput",), log_ratio=v)
            for i, v in enumerate((-0.1, 0.1))
        ]
    )
    row = with_interval(_result(100.0, measured=104.0), ("throughput",), model=model, level=0.8)
    assert row.low is not None and row.high is not None and row.low < 100.0 < row.high
    skipped = with_interval(_result(None), ("throughput",), model=model, level=0.8)
    assert (skipped.low, skipped.high) == (None, None)
    rows = [
        IntervalRow(**_result(100.0, measured=m).model_dump(), low=90.0, high=110.0)
        for m in (95.0, 105.0, 120.0)
    ]
    share, width = coverage_stats([*rows, skipped])
    assert share == pytest.approx(2 / 3)
    assert width == pytest.approx(110.0 / 90.0 - 1.0)

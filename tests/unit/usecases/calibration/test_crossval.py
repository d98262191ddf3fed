"""``gpuplan validate --cross-validate``: what it refuses, and that a fold too small to refit is skipped
rather than reported from the prior."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.errors import UserInputError
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.usecases.calibration.crossval import (
    MIN_TRAINING_ROWS,
    cross_validate,
    cross_validate_file,
    cross_validate_sweeps,
)
from gpuplan.usecases.calibration.published_serving import fit_rows
from gpuplan.usecases.validation.cases import Case

CATALOG = load_catalog()
TRAINING_HEADER = "id,model,gpu,num_gpus,global_batch_size,micro_batch_size,method,metric,value,quality\n"


def _case(i: int, gpu: str, scenario: str = "offline") -> Case:
    fields = {"id": f"r{i}", "gpu": gpu, "model": "meta-llama/Llama-3.1-8B", "scenario": scenario}
    return Case(
        schema_name="inference",
        id=f"r{i}",
        metric="output_tokens_per_s",
        value=1000.0,
        quality="A",
        fields=fields,
    )


def test_cross_validation_groups_only_by_gpu_or_model(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="not one of gpu, model"):
        cross_validate_file(tmp_path / "unread.csv", CATALOG, grades=["A"], by="engine")


def test_cross_validation_needs_inference_rows(tmp_path: Path) -> None:
    path = tmp_path / "training.csv"
    path.write_text(TRAINING_HEADER + "t1,meta-llama/Llama-3.1-8B,H100-SXM,8,512,4,full,tflops,400,A\n")
    with pytest.raises(UserInputError, match=r"needs inference\.csv rows"):
        cross_validate_file(path, CATALOG, grades=["A"], by="gpu")


def test_a_fold_with_too_few_rows_left_to_fit_is_skipped() -> None:
    half = MIN_TRAINING_ROWS - 1
    cases = [_case(i, "H100-SXM") for i in range(half)] + [
        _case(half + i, "A100-80GB-SXM") for i in range(half)
    ]
    result = cross_validate(cases, CATALOG, prior_calibration(), by="gpu")
    assert result.folds == [] and result.rows == []
    assert result.summary.rows == 0


def test_simulated_scenarios_are_left_out_of_the_fit() -> None:
    cases = [_case(0, "H100-SXM", "offline"), _case(1, "H100-SXM", "server"), _case(2, "H100-SXM", "rate")]
    assert [c.id for c in fit_rows(cases)] == ["r0"]


SWEEP_HEADER = "id,model,gpu,num_gpus,scenario,concurrency,input_len,output_len,metric,value,quality,notes\n"


def _sweep_file(folder: Path) -> Path:
    path = folder / "serving_sweeps.csv"
    row = "s{i},meta-llama/Llama-3.1-8B,H100-SXM,1,concurrency,{c},1000,200,output_tokens_per_s,900,A,"
    row += "--num-prompts 100\n"
    path.write_text(SWEEP_HEADER + "".join(row.format(i=i, c=2**i) for i in range(3)))
    return path


def test_load_sweeps_need_the_inference_rows_beside_them(tmp_path: Path) -> None:
    """A sweep row is predicted with the inference factors too, so a fold must refit those as well."""
    with pytest.raises(
        UserInputError, match=r"refits the inference factors too, and .*inference\.csv is missing"
    ):
        cross_validate_file(_sweep_file(tmp_path), CATALOG, grades=["A"], by="gpu")


def test_a_sweep_fold_without_enough_inference_rows_left_is_skipped() -> None:
    sweeps = [_case(0, "H100-SXM", "concurrency")]
    inference = [_case(i, "H100-SXM") for i in range(MIN_TRAINING_ROWS)]
    result = cross_validate_sweeps(sweeps, inference, CATALOG, prior_calibration(), by="gpu")
    assert result.folds == [] and result.summary.rows == 0

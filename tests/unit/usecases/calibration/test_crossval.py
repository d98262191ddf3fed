"""``gpuplan validate --cross-validate``: what it refuses, and that a fold too small to refit is skipped
rather than reported from the prior."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import UserInputError
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.usecases.calibration import crossval
from gpuplan.usecases.calibration.crossval import (
    MIN_TRAINING_ROWS,
    cross_validate,
    cross_validate_file,
    cross_validate_sweeps,
)
from gpuplan.usecases.calibration.published_serving import fit_rows
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.predict import RowResult

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


def test_training_rows_too_few_to_refit_give_no_fold(tmp_path: Path) -> None:
    path = tmp_path / "training.csv"
    path.write_text(TRAINING_HEADER + "t1,meta-llama/Llama-3.1-8B,H100-SXM,8,512,4,full,tflops,400,A\n")
    result = cross_validate_file(path, CATALOG, grades=["A"], by="gpu")
    assert result.folds == [] and result.rows == [] and result.summary.rows == 0


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
    result = cross_validate_sweeps(
        sweeps, line_rows=sweeps, inference=inference, catalog=CATALOG, prior=prior_calibration(), by="gpu"
    )
    assert result.folds == [] and result.summary.rows == 0


def test_a_file_mixing_sweep_and_other_rows_is_refused(tmp_path: Path) -> None:
    path = _sweep_file(tmp_path)
    path.write_text(
        path.read_text()
        + "x9,meta-llama/Llama-3.1-8B,H100-SXM,1,offline,,1000,200,output_tokens_per_s,900,A,\n"
    )
    with pytest.raises(UserInputError, match=r"mixes 3 load-sweep rows .* and 1 other rows"):
        cross_validate_file(path, CATALOG, grades=["A"], by="gpu")


def test_no_fold_fits_on_its_held_out_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both halves of a sweep fold's calibration see only the other GPUs' rows."""
    seen: list[tuple[str, set[str]]] = []

    def fit(train: list[Case], *_: object, **__: object) -> tuple[Calibration, list[object]]:
        seen.append(("inference", {c.get("gpu") for c in train}))
        return prior_calibration(), []

    def lines(train: list[Case], *_: object) -> dict[str, object]:
        seen.append(("lines", {c.get("gpu") for c in train}))
        return {}

    monkeypatch.setattr(crossval, "fit_calibration", fit)
    monkeypatch.setattr(crossval, "fit_release_lines", lines)
    stub = RowResult(
        id="s", metric="m", quality="A", gpu="g", measured=1.0, predicted=None, ape=None, skip_reason="stub"
    )
    monkeypatch.setattr(crossval, "predict_case", lambda *_: stub)
    gpus = ("H100-SXM", "A100-80GB-SXM")
    sweeps = [_case(i, gpu, "concurrency") for i, gpu in enumerate(gpus)]
    inference = [_case(10 + i, gpu) for i in range(MIN_TRAINING_ROWS) for gpu in gpus]
    crossval.cross_validate_sweeps(
        sweeps, line_rows=sweeps, inference=inference, catalog=CATALOG, prior=prior_calibration(), by="gpu"
    )
    held = [g for g in sorted(gpus) for _ in range(2)]
    assert [kind for kind, _ in seen] == ["inference", "lines"] * 2
    assert all(gpu not in used and used for (_, used), gpu in zip(seen, held, strict=True))

"""Calibration reaches the training plan: a ``bench train`` row fed to ``calibrate`` moves ``train-plan``'s
step time for that GPU to the measurement, changes the other GPUs of its family only by the stated shared
MFU factor, and leaves other families alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.adapters.bench.train.flops import credited_flops_per_token
from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import DataError
from gpuplan.core.training.spec import Method, TrainingJob, TrainingLayout
from gpuplan.core.training.step import predict_step
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.calibration.calibrate import calibrate_rows
from gpuplan.usecases.calibration.measured_rows import ResultRow
from gpuplan.usecases.calibration.measured_train import MFU_RANGE, predict_train_tflops, solve_mfu, train_case
from gpuplan.usecases.calibration.profile import load_training_calibration
from gpuplan.usecases.train import TrainPlanRequest, plan_training

CATALOG = load_catalog()
BUNDLED = default_training_calibration()
MODEL = "meta-llama/Llama-3.2-1B"
GPU = "H100-SXM"
SEQ, BATCH = 2048, 8
SLOWER = 1.2
"""The synthetic measurement takes 20 % longer than the bundled model predicts."""


def _bench_row(*, gpu: str = GPU, method: str = "full", slower: float = SLOWER) -> tuple[ResultRow, float]:
    """A ``bench train`` row whose step takes ``slower`` × the bundled prediction; also that step time."""
    model = get_model(MODEL)
    planner: Method = "lora" if method == "lora" else "full_ft"
    job = TrainingJob(method=planner, seq_len=SEQ, global_batch=BATCH)
    predicted = predict_step(model, CATALOG.get_gpu(gpu), job, TrainingLayout(micro_batch=BATCH), BUNDLED)
    measured_s = slower * predicted.step_time_s
    tflops = credited_flops_per_token(model, seq_len=SEQ, method=method) * BATCH * SEQ / measured_s / 1e12
    fields = {
        "dtype": "bf16",
        "model": MODEL,
        "batch_size": str(BATCH),
        "seq_len": str(SEQ),
        "method": method,
    }
    row = ResultRow(id="bs8", kind="train", gpu=gpu, metric="tflops", value=tflops, fields=fields)
    return row, measured_s


def _profile(tmp_path: Path, rows: list[ResultRow]) -> TrainingCalibration:
    path = tmp_path / "profile.yaml"
    calibrate_rows(rows, CATALOG, base=None, data="synthetic", output=path, command="test")
    return load_training_calibration(path)


def _step_s(gpu: str, cal: TrainingCalibration | None, method: Method = "full_ft") -> float:
    req = TrainPlanRequest(
        model=MODEL, method=method, tokens=1e9, seq_len=SEQ, global_batch=BATCH, gpus=(gpu,), max_gpus=1
    )
    return plan_training(req, CATALOG, cal).plans[0].step.step_time_s


def test_a_measurement_20_percent_slower_moves_the_plan_to_within_5_percent(tmp_path: Path) -> None:
    row, measured_s = _bench_row()
    before = _step_s(GPU, None)
    assert before == pytest.approx(measured_s / SLOWER, rel=0.02)  # the plan runs the measured layout
    cal = _profile(tmp_path, [row])
    after = _step_s(GPU, cal)
    assert after == pytest.approx(measured_s, rel=0.05)
    assert cal.mfu["hopper:bf16"] < BUNDLED.mfu["hopper:bf16"]


def test_other_gpus_change_only_by_the_stated_family_factor(tmp_path: Path) -> None:
    cal = _profile(tmp_path, [_bench_row()[0]])
    assert _step_s("A100-80GB-SXM", cal) == _step_s("A100-80GB-SXM", None)  # ampere: not measured
    h200_ratio = _step_s("H200-SXM", cal) / _step_s("H200-SXM", None)
    assert 1.1 < h200_ratio < 1.3  # hopper shares the fitted MFU ...
    req = TrainPlanRequest(
        model=MODEL, tokens=1e9, seq_len=SEQ, global_batch=BATCH, gpus=("H200-SXM",), max_gpus=1
    )
    factors = plan_training(req, CATALOG, cal).factors
    assert factors.mfu_changed == {"hopper:bf16": cal.mfu["hopper:bf16"]}  # ... and the plan says so
    assert factors.mfu_bundled == {"hopper:bf16": BUNDLED.mfu["hopper:bf16"]}
    shared = next(n for n in factors.notes if n.startswith("mfu hopper:bf16"))
    assert "H200-SXM" in shared and "H100-SXM" in shared and "A100" not in shared
    assert "synthetic (train: 1)" in factors.source


def test_a_lora_measurement_reaches_the_lora_plan(tmp_path: Path) -> None:
    row, measured_s = _bench_row(method="lora")
    cal = _profile(tmp_path, [row])
    assert _step_s(GPU, cal, method="lora") == pytest.approx(measured_s, rel=0.05)


def test_the_row_prediction_round_trips_the_measurement() -> None:
    row, measured_s = _bench_row()
    case = train_case(row, CATALOG)
    assert case is not None and case.measured_step_s == pytest.approx(measured_s, rel=1e-12)
    bundled_tflops = predict_train_tflops(row, CATALOG, BUNDLED)
    assert bundled_tflops == pytest.approx(row.value * SLOWER, rel=1e-9)  # 20 % faster than measured
    fitted = BUNDLED.model_copy(update={"mfu": BUNDLED.mfu | {case.key: solve_mfu(case, BUNDLED)}})
    assert predict_train_tflops(row, CATALOG, fitted) == pytest.approx(row.value, rel=1e-6)


def test_a_step_faster_than_the_peak_allows_clamps_the_mfu() -> None:
    row, _ = _bench_row(slower=0.05)  # 20× faster than predicted: no MFU up to the peak gets there
    case = train_case(row, CATALOG)
    assert case is not None
    assert solve_mfu(case, BUNDLED) == pytest.approx(MFU_RANGE[1], rel=1e-6)


def test_rows_the_step_model_cannot_price_are_left_out(tmp_path: Path) -> None:
    row, _ = _bench_row()
    unpriced = [
        row.model_copy(update={"fields": {k: v for k, v in row.fields.items() if k != "model"}}),
        row.model_copy(update={"fields": row.fields | {"dtype": "fp32"}}),
        row.model_copy(update={"gpu": "NOT-A-GPU"}),
        row.model_copy(update={"fields": row.fields | {"model": "no/such-model"}}),
    ]
    for r in unpriced:
        assert train_case(r, CATALOG) is None, r.fields
    out = calibrate_rows(unpriced, CATALOG, base=None, data="x", output=None, command="test")
    assert out["training_mfu"] == {}


def test_a_profile_without_training_entries_is_the_bundled_calibration(tmp_path: Path) -> None:
    path = tmp_path / "serving-only.yaml"
    calibrate_rows(
        [ResultRow(id="g", kind="gemm", gpu=GPU, metric="tflops", value=600.0, fields={"dtype": "bf16"})],
        CATALOG,
        base=None,
        data="x",
        output=path,
        command="test",
    )
    assert load_training_calibration(path) == BUNDLED


def test_a_training_mfu_that_is_not_a_number_is_a_data_error(tmp_path: Path) -> None:
    row, _ = _bench_row()
    path = tmp_path / "profile.yaml"
    calibrate_rows([row], CATALOG, base=None, data="x", output=path, command="test")
    text = path.read_text(encoding="utf-8")
    key_line = next(line for line in text.splitlines() if line.strip().startswith("hopper:bf16"))
    path.write_text(text.replace(key_line, "  hopper:bf16: fast"), encoding="utf-8")
    with pytest.raises(DataError, match="training_mfu"):
        load_training_calibration(path)

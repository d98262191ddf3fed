"""``calibrate`` → ``train-plan`` / ``recommend --task train`` / ``train-fit --calibration`` end to end, the
step-time breakdown and MFU convention they print, and ``--inter-node-gbps``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.adapters.bench.train.flops import credited_flops_per_token
from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import predict_step
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.interfaces.cli.app import app
from gpuplan.usecases.calibration.measured_rows import ResultRow, rows_to_csv

runner = CliRunner()
MODEL, GPU, SEQ, BATCH = "meta-llama/Llama-3.2-1B", "H100-SXM", 2048, 8
PLAN = ["--model", MODEL, "--seq-len", str(SEQ), "--tokens", "1e9", "--global-batch", str(BATCH)]


def _measured_profile(tmp_path: Path) -> tuple[Path, float]:
    """A results CSV with one bench train row 20 % slower than the bundled prediction, calibrated."""
    model = get_model(MODEL)
    job = TrainingJob(method="full_ft", seq_len=SEQ, global_batch=BATCH)
    predicted = predict_step(
        model,
        load_catalog().get_gpu(GPU),
        job,
        TrainingLayout(micro_batch=BATCH),
        default_training_calibration(),
    )
    measured_s = 1.2 * predicted.step_time_s
    tflops = credited_flops_per_token(model, seq_len=SEQ, method="full") * BATCH * SEQ / measured_s / 1e12
    fields = {
        "dtype": "bf16",
        "model": MODEL,
        "batch_size": str(BATCH),
        "seq_len": str(SEQ),
        "method": "full",
    }
    row = ResultRow(id="bs8", kind="train", gpu=GPU, metric="tflops", value=tflops, fields=fields)
    csv_path, profile = tmp_path / "results.csv", tmp_path / "profile.yaml"
    csv_path.write_text(rows_to_csv([row]), encoding="utf-8")
    result = runner.invoke(app, ["calibrate", str(csv_path), "-o", str(profile)])
    assert result.exit_code == 0, result.output
    return profile, measured_s


def _json(args: list[str]) -> dict[str, object]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _first_step_s(data: dict[str, object]) -> float:
    plans = data["plans"]
    assert isinstance(plans, list)
    return float(plans[0]["step"]["step_time_s"])


def test_calibrate_then_train_plan_and_recommend_reproduce_the_measured_step(tmp_path: Path) -> None:
    profile, measured_s = _measured_profile(tmp_path)
    one_gpu = ["--gpus", GPU, "--max-gpus", "1"]
    plan = _json(["train-plan", *PLAN, *one_gpu, "--calibration", str(profile)])
    assert _first_step_s(plan) == pytest.approx(measured_s, rel=0.05)
    assert _first_step_s(_json(["train-plan", *PLAN, *one_gpu])) == pytest.approx(measured_s / 1.2, rel=0.02)
    factors = plan["factors"]
    assert isinstance(factors, dict) and list(factors["mfu_changed"]) == ["hopper:bf16"]
    rec = _json(["recommend", "--task", "train", *PLAN, *one_gpu, "--calibration", str(profile)])
    assert _first_step_s(rec) == pytest.approx(measured_s, rel=0.05)
    fit = _json(["train-fit", "--model", MODEL, "--gpu", GPU, "--seq-len", str(SEQ), "--micro-batch", str(BATCH),
                 "--calibration", str(profile)])  # fmt: skip
    step = fit["step"]
    assert isinstance(step, dict) and step["step_time_s"] == pytest.approx(measured_s, rel=1e-6)


def test_train_plan_table_prints_the_breakdown_the_convention_and_the_shared_factor(tmp_path: Path) -> None:
    profile, _ = _measured_profile(tmp_path)
    result = runner.invoke(app, ["train-plan", *PLAN, "--gpus", "H200-SXM", "--max-gpus", "1",
                                 "--calibration", str(profile)])  # fmt: skip
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    for header in ("compute", "comm DP", "comm TP/CP/EP/PP", "bubble", "optimizer", "HFU"):
        assert header in out
    assert "MFU and HFU: model FLOPs (PaLM: 6N" in out and "LoRA/QLoRA 4N" in out
    assert "mfu hopper:bf16 =" in out and "every hopper GPU" in out and "H200-SXM" in out


def test_lower_inter_node_bandwidth_raises_exposed_communication() -> None:
    args = ["train-plan", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096", "--tokens", "1e9",
            "--gpus", "H100-SXM", "--max-gpus", "32"]  # fmt: skip

    def exposed(gbps: str) -> dict[int, float]:
        plans = _json([*args, "--inter-node-gbps", gbps])["plans"]
        assert isinstance(plans, list)
        return {p["gpus"]: p["step"]["dp_comm_exposed_s"] + p["step"]["mp_comm_exposed_s"] for p in plans}

    fast, slow = exposed("400"), exposed("25")
    assert slow[32] > fast[32] and slow[16] > fast[16]  # 2 and 4 nodes of 8
    assert slow[8] == fast[8]  # one node: NVLink only
    data = _json([*args, "--inter-node-gbps", "25"])
    factors = data["factors"]
    assert isinstance(factors, dict) and factors["inter_node_gbps"] == 25


@pytest.mark.parametrize("value", ["0", "-5", "5000", "nan", "inf"])
def test_a_bad_inter_node_bandwidth_is_a_one_line_error_naming_the_flag(value: str) -> None:
    result = runner.invoke(app, ["train-plan", *PLAN, "--inter-node-gbps", value])
    assert result.exit_code == 1, result.output
    assert "--inter-node-gbps must be between 1 and 1600" in result.output
    assert "Traceback" not in result.output and result.output.strip().count("\n") <= 1


def test_train_fit_and_recommend_take_the_inter_node_bandwidth() -> None:
    fit = ["train-fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--seq-len", "4096",
           "--dp", "32", "--zero", "3", "--checkpointing", "full"]  # fmt: skip

    def dp_exposed(*extra: str) -> float:
        step = _json([*fit, *extra])["step"]
        assert isinstance(step, dict)
        return float(step["dp_comm_exposed_s"])

    assert dp_exposed("--inter-node-gbps", "25") > dp_exposed("--inter-node-gbps", "400") == dp_exposed()
    rec = ["recommend", "--task", "train", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
           "--tokens", "1e9", "--gpus", "H100-SXM", "--max-gpus", "32", "--inter-node-gbps", "25"]  # fmt: skip
    factors = _json(rec)["factors"]
    assert isinstance(factors, dict) and factors["inter_node_gbps"] == 25


def test_inter_node_bandwidth_is_refused_where_it_means_nothing() -> None:
    serving = runner.invoke(app, ["recommend", "--model", MODEL, "--rate", "1", "--inter-node-gbps", "100"])
    assert (
        serving.exit_code == 1 and "--inter-node-gbps would be ignored by a serving request" in serving.output
    )
    fit = ["train-fit", "--model", MODEL, "--gpu", GPU, "--seq-len", "512", "--inter-node-gbps", "0"]
    bad = runner.invoke(app, fit)
    assert bad.exit_code == 1 and "--inter-node-gbps must be between 1 and 1600" in bad.output

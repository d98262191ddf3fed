"""gpuplan train-plan / train-fit through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"


def test_train_fit_json_breakdown() -> None:
    result = runner.invoke(
        app,
        [
            "train-fit",
            "--model",
            MODEL,
            "--gpu",
            "A100-80GB-SXM",
            "--seq-len",
            "2048",
            "--method",
            "qlora",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fits"] is True
    assert data["memory"]["total_bytes"] > data["memory"]["weights_bytes"] > 0
    assert data["step"]["tokens_per_s_per_gpu"] > 0


def test_train_fit_t4_does_not_fit_full_finetune() -> None:
    args = ["train-fit", "--model", "mistralai/Mistral-7B-v0.1", "--gpu", "T4", "--seq-len", "512"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output  # breakdown printed, then "infeasible" like inference fit
    assert "does NOT fit" in result.stdout


def test_train_plan_ranks_plans() -> None:
    result = runner.invoke(
        app,
        [
            "train-plan",
            "--model",
            MODEL,
            "--method",
            "lora",
            "--tokens",
            "1e8",
            "--seq-len",
            "2048",
            "--gpus",
            "H100-SXM",
            "--max-gpus",
            "8",
            "--global-batch",
            "64",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans and plans[0]["cost"]["wall_hours"] <= plans[-1]["cost"]["wall_hours"]


def test_train_plan_epochs_and_deadline_infeasible() -> None:
    result = runner.invoke(
        app,
        [
            "train-plan",
            "--model",
            MODEL,
            "--epochs",
            "3",
            "--samples",
            "1000000",
            "--seq-len",
            "2048",
            "--gpus",
            "L4",
            "--max-gpus",
            "2",
            "--deadline-hours",
            "1",
        ],
    )
    assert result.exit_code == 2
    assert "error:" in result.output


def test_bad_global_batch_is_one_line_error() -> None:
    result = runner.invoke(
        app,
        [
            "train-fit",
            "--model",
            MODEL,
            "--gpu",
            "H100-SXM",
            "--seq-len",
            "1024",
            "--dp",
            "4",
            "--global-batch",
            "10",
        ],
    )
    assert result.exit_code == 1
    assert "not divisible" in result.output and result.output.count("\n") <= 2


def test_recommend_task_finetune_ranks_training_plans() -> None:
    result = runner.invoke(
        app,
        [
            "recommend",
            "--task",
            "finetune",
            "--method",
            "qlora",
            "--model",
            MODEL,
            "--seq-len",
            "1024",
            "--tokens",
            "1e7",
            "--gpus",
            "L4",
            "--max-gpus",
            "2",
            "--global-batch",
            "8",
            "--price-basis",
            "hyperscaler",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "qlora" and data["plans"]


def test_recommend_task_train_rejects_lora() -> None:
    result = runner.invoke(
        app,
        [
            "recommend",
            "--task",
            "train",
            "--method",
            "lora",
            "--model",
            MODEL,
            "--seq-len",
            "1024",
            "--tokens",
            "1e7",
        ],
    )
    assert result.exit_code != 0
    assert "finetune" in result.output


TRAINING_SCENARIO = """\
model: meta-llama/Llama-3.1-8B
hardware: {gpu: A100-80GB-SXM}
training: {method: lora, seq_len: 2048, global_batch: 8, lora_rank: 16}
layout: {dp: 8, micro_batch: 1, checkpointing: full}
"""


def test_predict_and_fit_accept_a_training_scenario(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(TRAINING_SCENARIO, encoding="utf-8")
    flags = [
        "train-fit",
        "--model",
        MODEL,
        "--gpu",
        "A100-80GB-SXM",
        "--seq-len",
        "2048",
        "--method",
        "lora",
        "--lora-rank",
        "16",
        "--dp",
        "8",
        "--global-batch",
        "8",
        "--checkpointing",
        "full",
        "--format",
        "json",
    ]
    expected = json.loads(runner.invoke(app, flags).stdout)
    for command in (["predict", str(path)], ["fit", "--scenario", str(path)]):
        result = runner.invoke(app, [*command, "--format", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == expected  # the same layout as the flags: the same answer


def test_training_scenario_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TRAINING_SCENARIO.replace("seq_len: 2048", "seq_len: -5"), encoding="utf-8")
    result = runner.invoke(app, ["predict", str(path)])
    assert result.exit_code == 1
    assert "training.seq_len" in result.output and "Traceback" not in result.output


def test_fit_scenario_for_inference_matches_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "infer.yaml"
    path.write_text(
        "model: meta-llama/Llama-3.1-8B\nhardware: {gpu: H100-SXM, count: 2}\nprecision: {weights: fp8}\n"
        "workload: {input_tokens: 2000, output_tokens: 48}\n",
        encoding="utf-8",
    )
    by_file = runner.invoke(app, ["fit", "--scenario", str(path), "--format", "json"])
    by_flags = runner.invoke(
        app,
        [
            "fit",
            "--model",
            MODEL,
            "--gpu",
            "H100-SXM",
            "--count",
            "2",
            "--dtype",
            "fp8",
            "--context",
            "2048",
            "--format",
            "json",
        ],
    )
    assert by_file.exit_code == 0, by_file.output
    assert json.loads(by_file.stdout) == json.loads(by_flags.stdout)


def test_fit_without_model_or_scenario_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["fit", "--gpu", "H100-SXM"])
    assert result.exit_code == 1
    assert "--scenario" in result.output


def test_train_fit_virtual_stages_halve_the_bubble() -> None:
    base = [
        "train-fit",
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--gpu",
        "H100-SXM",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--pp",
        "4",
        "--global-batch",
        "8",
        "--checkpointing",
        "full",
        "--format",
        "json",
    ]
    plain = runner.invoke(app, base)
    interleaved = runner.invoke(app, [*base, "--virtual-stages", "2"])
    assert plain.exit_code == 0 and interleaved.exit_code == 0, plain.output + interleaved.output
    p, v = json.loads(plain.stdout), json.loads(interleaved.stdout)
    assert "v2" in v["layout"] and "v2" not in p["layout"]
    assert v["step"]["bubble_s"] == pytest.approx(p["step"]["bubble_s"] / 2)

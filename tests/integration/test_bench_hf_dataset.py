"""``bench serve --dataset-name hf --dataset-path DIR`` (vLLM's names) against the mock: a Hugging Face
dataset on local disk is sent with each row's real prompt and answer lengths; a Hub id is not fetched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app

parquet = pytest.importorskip("pyarrow.parquet", reason="the datasets extra brings pyarrow")
pyarrow = pytest.importorskip("pyarrow")

ROWS = [
    {"question": "how many legs has a spider", "answer": "eight legs in all"},
    {"question": "name a colour", "answer": "blue"},
    {"question": "what is the capital of France please", "answer": "Paris is the capital of France"},
]


def test_a_local_hub_layout_dataset_runs_with_its_real_lengths(tmp_path: Path, mock_url: str) -> None:
    folder = tmp_path / "qa" / "main"
    folder.mkdir(parents=True)
    parquet.write_table(pyarrow.Table.from_pylist(ROWS), folder / "test-00000-of-00001.parquet")
    parquet.write_table(pyarrow.Table.from_pylist(ROWS[:1]), folder / "train-00000-of-00001.parquet")
    flags = ["bench", "serve", "--url", mock_url, "--model", "m", "--concurrency", "1", "--num-prompts", "3"]
    flags += ["--dataset-name", "hf", "--dataset-path", str(tmp_path / "qa"), "--hf-subset", "main"]
    flags += ["--hf-split", "test", "--store", f"sqlite:///{tmp_path / 'r.sqlite'}", "--format", "json"]
    res = CliRunner().invoke(app, flags)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["requests_completed"] == 3  # each row once
    assert summary["input_tokens_mean"] == pytest.approx((6 + 3 + 7) / 3)  # the mock counts the words it got
    assert summary["output_tokens_mean"] == pytest.approx((4 + 1 + 6) / 3)  # each answer's length
    cut = CliRunner().invoke(app, [*flags, "--hf-output-len", "2"])
    assert cut.exit_code == 0 and json.loads(cut.stdout)["output_tokens_mean"] == 2.0


def test_a_hub_id_is_not_fetched_but_named_in_one_line(tmp_path: Path, mock_url: str) -> None:
    flags = ["bench", "serve", "--url", mock_url, "--model", "m", "--rate", "5", "--duration", "1"]
    flags += [
        "--dataset-name",
        "hf",
        "--dataset-path",
        "openai/gsm8k",
        "--store",
        f"sqlite:///{tmp_path / 'r.sqlite'}",
    ]
    res = CliRunner().invoke(app, flags)
    assert res.exit_code == 1 and "--dataset-path openai/gsm8k: no such file or folder" in res.output
    assert "local disk only" in res.output and "Traceback" not in res.output

"""End-to-end tests of the ``gpuplan`` CLI: every command, its JSON contract, and bad input.

Fixtures ``invoke`` and ``user_error`` (conftest.py) fail a test on any escaped exception or
'Traceback'. Rows in ``data/*.csv`` are copied verbatim from shared/validation (with source_url).
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplan.core.calibration.serving import parse_calibration

SRC = Path(__file__).resolve().parents[2] / "src"
DATA = Path(__file__).parent / "data"
Invoke = Callable[..., Any]

PLAN_KEYS = {
    "gpu",
    "count",
    "tp",
    "pp",
    "replicas",
    "weight_dtype",
    "ttft_ms",
    "tpot_ms",
    "output_tokens_per_s",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "memory_per_gpu_gib",
}
ROW_KEYS = {"id", "metric", "measured", "predicted", "ape", "skip_reason"}

TINY_8B = ("recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "10", "--output-tokens", "10")
"""The smallest recommend request the error tests build on (add a load and the flag under test)."""
RECOMMEND_8B = (
    "recommend",
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--input-tokens",
    "1024",
    "--output-tokens",
    "256",
    "--ttft-ms",
    "1000",
    "--tpot-ms",
    "50",
    "--gpus",
    "H100-SXM,L4",
    "--max-gpus",
    "8",
)


def _json(invoke: Invoke, *args: str | Path) -> Any:
    run = invoke(*args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def _scenario(tmp_path: Path, doc: dict[str, Any] | str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


PREDICT_DOC: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": {"gpu": "H100-SXM", "count": 2},
    "precision": {"weights": "fp8"},
    "workload": {"scenario": "concurrency", "input_tokens": 1024, "output_tokens": 256, "concurrency": 32},
}


# --- catalog listings ------------------------------------------------------------------------------


def test_gpus_table(invoke: Invoke) -> None:
    run = invoke("gpus")
    assert run.exit_code == 0
    assert "GPU catalog" in run.stdout
    assert "H100-SXM" in run.stdout


def test_gpus_json(invoke: Invoke) -> None:
    data = _json(invoke, "gpus")
    ids = {g["id"] for g in data["gpus"]}
    assert {"H100-SXM", "A100-80GB-SXM", "L4"} <= ids
    h100 = next(g for g in data["gpus"] if g["id"] == "H100-SXM")
    assert h100["memory_bytes"] == pytest.approx(80e9, rel=0.1)
    assert isinstance(data["prices"], list)


def test_models_table(invoke: Invoke) -> None:
    run = invoke("models")
    assert run.exit_code == 0
    assert "Bundled models" in run.stdout
    assert "Llama-3.1" in run.stdout


def test_models_json(invoke: Invoke) -> None:
    models = {m["id"]: m for m in _json(invoke, "models")["models"]}
    llama = models["meta-llama/Llama-3.1-8B"]
    assert llama["params_b"] == pytest.approx(8.03, abs=0.01)
    # 32 layers x 8 KV heads x 128 head_dim x (K+V) x 2 bytes
    assert llama["kv_bytes_per_token_bf16"] == 32 * 8 * 128 * 2 * 2


# --- fit -------------------------------------------------------------------------------------------


def test_fit_table(invoke: Invoke) -> None:
    run = invoke("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM")
    assert run.exit_code == 0
    assert "fits:" in run.stdout
    assert "KV-cache pool" in run.stdout


def test_fit_json_memory_fields(invoke: Invoke) -> None:
    data = _json(invoke, "fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM")
    assert data["model"] == "meta-llama/Llama-3.1-8B"
    assert data["gpu"] == "H100-SXM"
    mem = data["memory"]
    assert {
        "usable_bytes",
        "budget_bytes",
        "weights_bytes",
        "activation_bytes",
        "overhead_bytes",
        "kv_pool_bytes",
        "kv_bytes_per_token",
        "kv_tokens",
        "max_model_len",
        "max_concurrency",
        "fits",
    } <= set(mem)
    assert mem["fits"] is True
    assert mem["weights_bytes"] == pytest.approx(8.03e9 * 2, rel=0.01)  # bf16
    assert mem["kv_bytes_per_token"] == 131072
    assert mem["kv_tokens"] > 100_000
    budget_parts = (
        mem["weights_bytes"] + mem["activation_bytes"] + mem["overhead_bytes"] + mem["kv_pool_bytes"]
    )
    assert budget_parts == pytest.approx(mem["budget_bytes"], rel=1e-6)  # vLLM accounting
    assert mem["kv_tokens"] * mem["kv_bytes_per_token"] <= mem["kv_pool_bytes"]


def test_fit_70b_bf16_on_one_l4_does_not_fit(invoke: Invoke) -> None:
    run = invoke("fit", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "L4")
    assert "does NOT fit" in run.stdout and run.exit_code == 2  # breakdown printed, then "infeasible"
    as_json = invoke("fit", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "L4", "--format", "json")
    assert as_json.exit_code == 2
    data = json.loads(as_json.stdout)
    assert data["memory"]["fits"] is False
    assert data["memory"]["kv_tokens"] == 0
    assert data["memory"]["weights_bytes"] > 130 * 2**30


# --- predict ---------------------------------------------------------------------------------------


def test_predict_json(invoke: Invoke, tmp_path: Path) -> None:
    data = _json(invoke, "predict", _scenario(tmp_path, PREDICT_DOC))
    layout, p = data["layout"], data["prediction"]
    assert layout["tp"] * layout["pp"] * layout["replicas"] == 2
    assert layout["weight_dtype"] == "fp8"
    assert data["gpu"] == "H100-SXM"
    assert p["num_gpus"] == 2
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "requests_per_s"):
        assert p[key] > 0, key
    # TPOT is the mean inter-token time after the first token (docs/metrics.md)
    assert p["e2e_s"] == pytest.approx(p["ttft_s"] + (256 - 1) * p["tpot_s"], rel=1e-9)
    assert p["requests_per_s"] == pytest.approx(p["output_tokens_per_s"] / 256, rel=1e-9)
    assert p["output_tokens_per_s_per_gpu"] == pytest.approx(p["output_tokens_per_s"] / 2, rel=1e-9)
    assert 1 <= p["running_per_replica"] <= 32
    if data["usd_per_hour"] is not None:
        per_m = data["usd_per_hour"] / (p["output_tokens_per_s"] * 3600) * 1e6
        assert data["usd_per_million_output_tokens"] == pytest.approx(per_m, rel=1e-6)


def test_predict_table(invoke: Invoke, tmp_path: Path) -> None:
    run = invoke("predict", _scenario(tmp_path, PREDICT_DOC))
    assert run.exit_code == 0
    assert "TTFT ms" in run.stdout and "TPOT ms" in run.stdout


def test_predict_rate_scenario_uses_rate(invoke: Invoke, tmp_path: Path) -> None:
    doc = {
        **PREDICT_DOC,
        "workload": {"scenario": "rate", "input_tokens": 512, "output_tokens": 128, "rate_rps": 2},
    }
    p = _json(invoke, "predict", _scenario(tmp_path, doc))["prediction"]
    assert p["requests_per_s"] == pytest.approx(2.0, rel=1e-6)


# --- recommend -------------------------------------------------------------------------------------


def _check_plans(data: dict[str, Any], *, gpus: set[str], max_gpus: int) -> None:
    assert set(data) >= {"plans", "rejected"}
    assert data["plans"], "expected at least one plan"
    for plan in data["plans"]:
        assert set(plan) >= PLAN_KEYS, PLAN_KEYS - set(plan)
        assert plan["gpu"] in gpus
        prefill = plan["prefill"]["count"] if plan["layout_kind"] == "disaggregated" else 0
        assert plan["count"] == plan["tp"] * plan["pp"] * plan["replicas"] + prefill <= max_gpus
        assert plan["ttft_ms"] <= 1000 and plan["tpot_ms"] <= 50
        assert plan["memory_per_gpu_gib"] > 0
        if plan["usd_per_hour"] is not None:
            per_m = plan["usd_per_hour"] / (plan["output_tokens_per_s"] * 3600) * 1e6
            assert plan["usd_per_million_output_tokens"] == pytest.approx(per_m, rel=1e-6)
    for rej in data["rejected"]:
        assert {"gpu", "reason", "kind"} <= set(rej)


def test_recommend_rate_json(invoke: Invoke) -> None:
    data = _json(invoke, *RECOMMEND_8B, "--rate", "5")
    _check_plans(data, gpus={"H100-SXM", "L4"}, max_gpus=8)
    for plan in data["plans"]:
        assert plan["output_tokens_per_s"] == pytest.approx(5 * 256, rel=1e-6)
    costs = [p["usd_per_hour"] for p in data["plans"] if p["usd_per_hour"] is not None]
    assert costs[0] == min(costs)  # objective cost: cheapest first


def test_recommend_concurrency_json(invoke: Invoke) -> None:
    data = _json(invoke, *RECOMMEND_8B, "--concurrency", "16")
    _check_plans(data, gpus={"H100-SXM", "L4"}, max_gpus=8)


def test_recommend_scenario_file(invoke: Invoke, tmp_path: Path) -> None:
    doc = {
        "model": "meta-llama/Llama-3.1-8B",
        "workload": {"input_tokens": 1024, "output_tokens": 256, "rate_rps": 5},
        "sla": {"ttft_ms": 1000, "tpot_ms": 50},
        "hardware": {"gpus": ["H100-SXM", "L4"], "max_gpus": 8},
    }
    data = _json(invoke, "recommend", _scenario(tmp_path, doc))
    _check_plans(data, gpus={"H100-SXM", "L4"}, max_gpus=8)


def test_recommend_p99_limits_size_on_the_simulator(invoke: Invoke) -> None:
    args = [
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--rate",
        "8",
        "--ttft-p99-ms",
        "1500",
        "--tpot-p99-ms",
        "80",
        "--gpus",
        "L4",
        "--max-gpus",
        "8",
        "--provider",
        "AWS",
    ]
    data = _json(invoke, *args)
    assert data["plans"]
    for plan in data["plans"]:
        assert plan["sized_on"] == "p99"
        assert plan["ttft_p99_ms"] <= 1500 and plan["tpot_p99_ms"] <= 80
    sources = [plan["p99_source"] for plan in data["plans"]]
    assert sources[0] == "simulator" and set(sources) <= {"simulator", "tail model"}
    table = invoke(*args)
    assert table.exit_code == 0 and "P99 TTFT" in table.stdout and "P99 from" in table.stdout
    first_row = next(line for line in table.stdout.splitlines() if line.lstrip("│ ").startswith("L4"))
    assert " sim " in first_row  # the best plan's P99s are simulated, and its row says so


def test_recommend_p99_limits_with_disaggregated_layouts(invoke: Invoke) -> None:
    flags = ["--model", "meta-llama/Llama-3.1-70B", "--gpus", "H200-SXM", "--rate", "20", "--max-gpus", "512"]
    load = ["--input-tokens", "8000", "--output-tokens", "500", "--ttft-p99-ms", "1200"]
    data = _json(invoke, "recommend", *flags, *load, "--layouts", "disaggregated")
    for plan in data["plans"]:  # each confirmed on the simulator, its pools as sized there
        assert plan["layout_kind"] == "disaggregated" and plan["p99_source"] == "simulator"
        assert plan["ttft_p99_ms"] <= 1200 and plan["p99_pools"]
    assert any("sized on P99" in line for line in data["explanation"])


def test_recommend_table(invoke: Invoke) -> None:
    run = invoke(*RECOMMEND_8B, "--rate", "5")
    assert run.exit_code == 0
    assert "Plans for meta-llama/Llama-3.1-8B" in run.stdout


def test_recommend_infeasible_exit_2(user_error: Any) -> None:
    line = user_error(
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "256",
        "--rate",
        "5",
        "--gpus",
        "L4",
        "--max-gpus",
        "2",
        "--dtypes",
        "bf16",
        "--format",
        "json",
        code=2,
    )
    assert "nearest" in line
    assert "L4" in line


def test_entry_point_subprocess() -> None:
    """The real ``python -m gpuplan`` entry point, not the in-process app."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "gpuplan", "recommend", "--example", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"] == "Qwen/Qwen2.5-32B-Instruct"
    assert data["plans"]
    assert set(data["plans"][0]) >= PLAN_KEYS


# --- validate --------------------------------------------------------------------------------------


def _check_report(data: dict[str, Any], *, rows: int) -> None:
    summary = data["summary"]
    assert summary["rows"] == rows == len(data["rows"])
    assert summary["predicted"] + summary["skipped"] == summary["rows"]
    assert summary["predicted"] == sum(r["predicted"] is not None for r in data["rows"])
    for row in data["rows"]:
        assert set(row) >= ROW_KEYS
        if row["predicted"] is None:
            assert row["ape"] is None and row["skip_reason"]
        else:
            assert row["skip_reason"] is None
            assert row["ape"] == pytest.approx(
                abs(row["predicted"] / row["measured"] - 1), rel=1e-9, abs=1e-12
            )
    for metric, st in summary["by_metric"].items():
        apes = [r["ape"] for r in data["rows"] if r["metric"] == metric and r["ape"] is not None]
        assert st["n"] == len(apes)
        assert st["mape"] == pytest.approx(sum(apes) / len(apes), rel=1e-9)
        assert st["median_ape"] == pytest.approx(statistics.median(apes), rel=1e-9)


def _csv_ids(path: Path, grades: str = "AB") -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [r["id"] for r in csv.DictReader(handle) if r["quality"] in grades]


def test_validate_inference_json(invoke: Invoke) -> None:
    path = DATA / "inference_small.csv"
    data = _json(invoke, "validate", path)
    _check_report(data, rows=len(_csv_ids(path)))
    rows = {r["id"]: r for r in data["rows"]}
    assert rows["I0014"]["predicted"] > 0  # server row: capacity search in the serving simulator
    assert rows["I0014"]["skip_reason"] is None
    assert rows["I0103"]["measured"] == pytest.approx(14108.0361)
    assert {"output_tokens_per_s", "ttft_ms_mean", "tpot_ms_mean"} <= set(data["summary"]["by_metric"])


def test_validate_inference_memory_json(invoke: Invoke) -> None:
    path = DATA / "inference_memory_small.csv"
    data = _json(invoke, "validate", path)
    _check_report(data, rows=len(_csv_ids(path)))
    assert "IM0001" not in {r["id"] for r in data["rows"]}  # grade C is excluded by default
    everything = _json(invoke, "validate", path, "--grades", "A,B,C")
    _check_report(everything, rows=len(_csv_ids(path, "ABC")))
    assert "IM0001" in {r["id"] for r in everything["rows"]}


def test_validate_training_rows_are_predicted(invoke: Invoke) -> None:
    data = _json(invoke, "validate", DATA / "training_small.csv")
    _check_report(data, rows=1)
    row = data["rows"][0]
    assert row["skip_reason"] is None
    assert row["predicted"] is not None and row["predicted"] > 0
    assert row["ape"] == abs(row["predicted"] / row["measured"] - 1)


def test_validate_table(invoke: Invoke) -> None:
    run = invoke("validate", DATA / "inference_small.csv")
    assert run.exit_code == 0
    assert "median APE" in run.stdout and "7/7 predicted" in run.stdout  # the server row is simulated now


def test_validate_fit_out(invoke: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "calibration.yaml"
    run = invoke("validate", DATA / "inference_small.csv", "--fit-out", out, "--format", "json")
    assert run.exit_code == 0, run.stderr
    cal = parse_calibration(yaml.safe_load(out.read_text(encoding="utf-8")), origin=str(out))
    assert "inference_small.csv" in cal.provenance.data
    # The fit uses the analytic rows; the simulated server row (I0014) is validated, not fitted.
    with (DATA / "inference_small.csv").open(newline="", encoding="utf-8") as handle:
        analytic = [r["id"] for r in csv.DictReader(handle) if r["scenario"] not in ("server", "rate")]
    assert cal.provenance.rows == len(analytic) == len(_csv_ids(DATA / "inference_small.csv")) - 1
    assert json.loads(run.stdout)["summary"]["rows"] == cal.provenance.rows + 1


def test_json_has_no_nan_or_infinity(invoke: Invoke, tmp_path: Path) -> None:
    """Offline TTFT is unbounded (an infinite queue); JSON carries it as null, never Infinity."""
    doc = {**PREDICT_DOC, "workload": {"scenario": "offline", "input_tokens": 512, "output_tokens": 128}}
    run = invoke("predict", _scenario(tmp_path, doc), "--format", "json")
    assert run.exit_code == 0
    assert "Infinity" not in run.stdout and "NaN" not in run.stdout
    p = json.loads(run.stdout)["prediction"]
    assert p["ttft_s"] is None or math.isfinite(p["ttft_s"])


# --- bad input -------------------------------------------------------------------------------------


def test_unknown_gpu(user_error: Any) -> None:
    line = user_error("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    assert "'H100'" in line and "did you mean" in line and "H100-SXM" in line


def test_unknown_gpu_in_recommend(user_error: Any) -> None:
    line = user_error(
        *TINY_8B,
        "--rate",
        "1",
        "--gpus",
        "H100",
    )
    assert "H100-SXM" in line


def test_unknown_model(user_error: Any) -> None:
    line = user_error("fit", "--model", "meta-llama/Llama-9-8B", "--gpu", "H100-SXM")
    assert "unknown model" in line and "meta-llama/Llama-9-8B" in line and "did you mean" in line


def test_malformed_yaml_names_file_and_line(user_error: Any, tmp_path: Path) -> None:
    path = _scenario(tmp_path, "model: x\nworkload: {input_tokens: 1\n  bad: [\n", name="broken.yaml")
    line = user_error("predict", path)
    assert "broken.yaml" in line and "line 3" in line


def test_negative_input_tokens(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "workload": {"input_tokens": -5, "output_tokens": 10, "concurrency": 4}}
    line = user_error("predict", _scenario(tmp_path, doc))
    assert "workload.input_tokens" in line and "scenario.yaml" in line


def test_unknown_scenario_key(user_error: Any, tmp_path: Path) -> None:
    line = user_error("predict", _scenario(tmp_path, {**PREDICT_DOC, "foo": 1}))
    assert "foo" in line and "Extra inputs" in line


def test_unknown_nested_scenario_key(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "hardware": {"gpu": "H100-SXM", "gpu_count": 2}}
    line = user_error("predict", _scenario(tmp_path, doc))
    assert "hardware.gpu_count" in line


def test_scenario_not_a_mapping(user_error: Any, tmp_path: Path) -> None:
    line = user_error("predict", _scenario(tmp_path, "- just\n- a list\n"))
    assert "expected a mapping" in line


def test_tp_not_dividing_heads_scenario(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "hardware": {"gpu": "H100-SXM", "count": 3}, "parallelism": {"tp": 3}}
    line = user_error("predict", _scenario(tmp_path, doc))
    assert "tp=3" in line and "32 attention heads" in line


def test_tp_not_dividing_heads_fit(user_error: Any) -> None:
    line = user_error(
        "fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--tp", "3", "--count", "3"
    )
    assert "tp=3" in line


def test_count_not_multiple_of_tp(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "hardware": {"gpu": "H100-SXM", "count": 3}, "parallelism": {"tp": 2}}
    line = user_error("predict", _scenario(tmp_path, doc))
    assert "hardware.count" in line


def test_predict_needs_gpu(user_error: Any, tmp_path: Path) -> None:
    doc = {k: v for k, v in PREDICT_DOC.items() if k != "hardware"}
    assert "hardware.gpu" in user_error("predict", _scenario(tmp_path, doc))


@pytest.mark.parametrize("value", ["0", "-3"])
def test_max_gpus_not_positive(user_error: Any, value: str) -> None:
    line = user_error(
        *TINY_8B,
        "--rate",
        "1",
        "--max-gpus",
        value,
    )
    assert "max-gpus" in line or "max_gpus" in line


@pytest.mark.parametrize("command", [("gpus",), ("models",), ("validate", str(DATA / "training_small.csv"))])
def test_format_xml(user_error: Any, command: tuple[str, ...]) -> None:
    line = user_error(*command, "--format", "xml")
    assert "--format" in line and "xml" in line


def test_missing_scenario_file(user_error: Any, tmp_path: Path) -> None:
    line = user_error("predict", tmp_path / "nope.yaml")
    assert "nope.yaml" in line


def test_missing_recommend_scenario_file(user_error: Any, tmp_path: Path) -> None:
    assert "nope.yaml" in user_error("recommend", tmp_path / "nope.yaml")


def test_csv_bad_header(user_error: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    line = user_error("validate", path)
    assert "bad.csv" in line and "header" in line


def test_csv_header_matches_no_schema(user_error: Any, tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    path.write_text("id,model,gpu,metric,value,quality\nX1,m,g,x,1,A\n", encoding="utf-8")
    assert "odd.csv" in user_error("validate", path)


def test_csv_value_not_a_number(user_error: Any, tmp_path: Path) -> None:
    rows = (DATA / "inference_small.csv").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "nan.csv"
    path.write_text("\n".join([rows[0], rows[1].replace(",20556.40,", ",lots,")]) + "\n", encoding="utf-8")
    line = user_error("validate", path)
    assert "nan.csv" in line and "line" in line and "lots" in line


def test_missing_csv(user_error: Any, tmp_path: Path) -> None:
    assert "none.csv" in user_error("validate", tmp_path / "none.csv")


def test_config_json_missing(user_error: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config.json"
    assert str(missing) in user_error("fit", "--model", missing, "--gpu", "H100-SXM")


def test_config_json_is_a_directory(user_error: Any, tmp_path: Path) -> None:
    folder = tmp_path / "config.json"
    folder.mkdir()
    assert "config.json" in user_error("fit", "--model", folder, "--gpu", "H100-SXM")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe\x00", "cannot read"),
        (b"[1, 2]", "JSON object"),
        (b'{"a": 1}', "model_type"),
    ],
)
def test_config_json_unreadable(user_error: Any, tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    line = user_error("fit", "--model", path, "--gpu", "H100-SXM")
    assert needle in line and "config.json" in line


def test_rate_and_concurrency_both(user_error: Any) -> None:
    line = user_error(
        *TINY_8B,
        "--rate",
        "1",
        "--concurrency",
        "4",
    )
    assert "rate_rps" in line and "concurrency" in line


def test_neither_rate_nor_concurrency(user_error: Any) -> None:
    line = user_error(
        "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "10", "--output-tokens", "10"
    )
    assert "rate_rps" in line


def test_recommend_without_model(user_error: Any) -> None:
    assert "--model" in user_error(
        "recommend", "--input-tokens", "10", "--output-tokens", "10", "--rate", "1"
    )


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--rate", "-1", "greater than 0"),
        ("--rate", "inf", "finite number"),
        ("--rate", "nan", "finite number"),
        ("--concurrency", "0", "greater than or equal to 1"),
        ("--ttft-ms", "-5", "greater than 0"),
        ("--budget", "-1", "greater than 0"),
        ("--objective", "fastest", "'cost', 'latency' or 'throughput'"),
    ],
)
def test_recommend_bad_flag_values_name_the_flag(user_error: Any, flag: str, value: str, rule: str) -> None:
    """Issue 18: errors named document fields (``workload.rate_rps``) where the user typed ``--rate``."""
    args = [*TINY_8B]
    if flag not in ("--rate", "--concurrency"):
        args += ["--rate", "1"]
    line = user_error(*args, flag, value)
    assert line.startswith(f"error: {flag}: ") and rule in line and "workload." not in line


def test_unknown_engine(user_error: Any) -> None:
    line = user_error(
        *TINY_8B,
        "--rate",
        "1",
        "--engine",
        "foo",
    )
    assert "engine" in line and "foo" in line


def test_unknown_dtype_in_recommend(user_error: Any) -> None:
    line = user_error(
        *TINY_8B,
        "--rate",
        "1",
        "--dtypes",
        "fp9",
    )
    assert "fp9" in line


def test_unknown_dtype_in_fit(user_error: Any) -> None:
    assert "fp9" in user_error(
        "fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--dtype", "fp9"
    )


def test_very_long_model_id(user_error: Any) -> None:
    assert "unknown model" in user_error("fit", "--model", "a" * 300, "--gpu", "H100-SXM")


def test_model_path_unknown_user(user_error: Any) -> None:
    assert "~nosuchuser" in user_error("fit", "--model", "~nosuchuser/config.json", "--gpu", "H100-SXM")


@pytest.mark.parametrize("extra", [("--pp", "2"), ("--count", "0")])
def test_fit_pp_larger_than_count(user_error: Any, extra: tuple[str, str]) -> None:
    line = user_error("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", *extra)
    assert "count" in line or "pp" in line


def test_fit_tp_larger_than_count(user_error: Any) -> None:
    line = user_error(
        "fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--tp", "2", "--count", "1"
    )
    assert "count" in line


def test_predict_rate_scenario_needs_rate(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "workload": {"scenario": "rate", "input_tokens": 512, "output_tokens": 128}}
    assert "rate_rps" in user_error("predict", _scenario(tmp_path, doc))


def test_context_too_long_message_names_the_context(user_error: Any, tmp_path: Path) -> None:
    doc = {**PREDICT_DOC, "workload": {"input_tokens": 10_000_000, "output_tokens": 10, "concurrency": 1}}
    line = user_error("predict", _scenario(tmp_path, doc))  # beyond the model's window: a user error
    assert "10,000,010 tokens" in line and "context window of 131,072" in line
    doc = {**doc, "workload": {"input_tokens": 4_000_000, "output_tokens": 10, "concurrency": 1}}
    doc["max_model_len"] = 4_000_010  # planning beyond the window on purpose: then it does not fit
    line = user_error("predict", _scenario(tmp_path, doc), code=2)
    assert "4,000,010 context tokens" in line


def test_validate_zero_measurement_is_not_a_silent_skip(invoke: Invoke) -> None:
    data = _json(invoke, "validate", DATA / "inference_memory_fits0.csv", "--grades", "C")
    skipped_with_reason = sum(r["skip_reason"] is not None for r in data["rows"])
    assert data["summary"]["skipped"] == skipped_with_reason


def test_unknown_dtype_hint_names_a_real_command(user_error: Any, invoke: Invoke) -> None:
    line = user_error("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--dtype", "fp9")
    if "gpuplan dtypes" in line:
        assert invoke("dtypes").exit_code == 0


@pytest.mark.parametrize(
    "flag", [["--seq-len", "2048"], ["--tokens", "1e9"], ["--method", "lora"], ["--global-batch", "8"]]
)
def test_recommend_serving_refuses_training_flags(user_error: Any, flag: list[str]) -> None:
    """Issue 22: ``recommend`` for serving took ``--seq-len``/``--tokens``/``--method`` and ignored them."""
    line = user_error(*TINY_8B, "--rate", "1", *flag)
    assert f"{flag[0]} would be ignored by a serving request" in line and "--task train" in line

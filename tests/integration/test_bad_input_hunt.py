"""Bad inputs found by an adversarial pass over every command: each is one stderr line naming the
field or file and a non-zero exit, never a traceback (and never a silent wrong answer)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS_CSV = ROOT / "docs" / "playbooks" / "inputs" / "h200-results.csv"
UserError = Callable[..., str]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "--count", "abc"], "Invalid value for '--count'"),
        (["recommend", "--rate", "abc"], "Invalid value for '--rate'"),
        (["fit", "--foo"], "No such option: --foo"),
        (["validate"], "Missing argument"),
    ],
)
def test_usage_errors_are_one_line_user_errors(args: list[str], expected: str) -> None:
    # click's own usage errors exit 2, which in gpuplan means "infeasible": the entry point maps them to 1.
    out = subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == 1 and len(lines) == 1 and expected in lines[0], out.stderr
    assert "--help" in lines[0]


def test_output_paths_that_are_folders_or_missing(user_error: UserError, tmp_path: Path) -> None:
    line = user_error("calibrate", str(RESULTS_CSV), "-o", str(tmp_path))
    assert f"cannot use {tmp_path}: Is a directory" in line
    line = user_error("calibrate", str(RESULTS_CSV), "-o", str(tmp_path / "no" / "such" / "x.yaml"))
    assert "No such file or directory" in line


def test_a_store_that_is_not_a_database(user_error: UserError, tmp_path: Path) -> None:
    garbage = _write(tmp_path / "x.sqlite", "garbage")
    line = user_error("results", "list", "--store", f"sqlite:///{garbage}", code=4)
    assert "cannot open the results store" in line and "file is not a database" in line


def test_nested_yaml_in_a_catalog(user_error: UserError, tmp_path: Path) -> None:
    deep = _write(tmp_path / "deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in user_error("gpus", "--catalog", str(deep))


@pytest.mark.parametrize("text", ["not: [yaml\n", "- a\n", "scalar\n"])
def test_a_malformed_kubeconfig(user_error: UserError, tmp_path: Path, text: str) -> None:
    config = _write(tmp_path / "kubeconfig", text)
    assert "not a kubeconfig YAML mapping" in user_error("k8s", "inventory", "--kubeconfig", str(config))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--context", "-5"], "--context must be a whole number >= 1, got -5"),
        (["--context", "0"], "--context must be a whole number >= 1, got 0"),
        (["--tp", "0"], "--tp must be a whole number >= 1, got 0"),
        (["--utilization", "nan"], "--utilization must be in (0, 1], got nan"),
    ],
)
def test_fit_flags_out_of_range(user_error: UserError, flags: list[str], expected: str) -> None:
    assert expected in user_error("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", *flags)


def test_validate_bad_cells_and_grades(
    user_error: UserError, invoke: Callable[..., object], tmp_path: Path
) -> None:
    source = (ROOT / "tests" / "integration" / "data" / "inference_small.csv").read_text(encoding="utf-8")
    header, first, *rest = source.splitlines()
    columns = header.split(",")
    cells = first.split(",")
    cells[columns.index("value")] = "nan"
    bad = _write(tmp_path / "nan.csv", "\n".join([header, ",".join(cells), *rest]) + "\n")
    assert "line 2: value 'nan' must be a finite measurement >= 0" in user_error("validate", str(bad))
    assert "no row of inference_small.csv has these quality grades" in user_error(
        "validate", str(ROOT / "tests" / "integration" / "data" / "inference_small.csv"), "--grades", "Z"
    )


def test_validate_row_conditions_are_skipped_per_row(invoke: Callable[..., object], tmp_path: Path) -> None:
    source = (ROOT / "tests" / "integration" / "data" / "inference_small.csv").read_text(encoding="utf-8")
    header, first, *rest = source.splitlines()
    columns = header.split(",")
    rows = []
    for tp in ("1.5", "-2"):
        cells = first.split(",")
        cells[columns.index("tp")] = tp
        cells[columns.index("id")] = f"bad{tp}"
        rows.append(",".join(cells))
    path = _write(tmp_path / "tp.csv", "\n".join([header, *rows, *rest]) + "\n")
    run = invoke("validate", str(path), "--grades", "A,B,C", "--format", "json")
    assert run.exit_code == 0  # type: ignore[attr-defined]
    reasons = {r["id"]: r["skip_reason"] for r in json.loads(run.stdout)["rows"]}  # type: ignore[attr-defined]
    assert reasons["bad1.5"] == "tp '1.5' is not a whole number >= 0"
    assert reasons["bad-2"] == "tp '-2' is not a whole number >= 0"


def test_training_tokens_must_be_finite(user_error: UserError) -> None:
    line = user_error(
        "train-plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--seq-len", "2048", "--tokens", "inf"
    )
    assert "--tokens must be a finite number > 0, got inf" in line


def test_k8s_render_refuses_names_kubernetes_refuses(
    user_error: UserError, invoke: Callable[..., object], tmp_path: Path
) -> None:
    run = invoke(
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--rate",
        "2",
        "--gpus",
        "H100-SXM",
        "--format",
        "json",
    )
    rec = _write(tmp_path / "rec.json", run.stdout)  # type: ignore[attr-defined]
    line = user_error("k8s", "render", str(rec), "--max-model-len", "640", "--namespace", "Bad NS")
    assert "--namespace 'Bad NS' is not a Kubernetes name" in line
    assert "max_model_len: Input should be greater than or equal to 1" in user_error(
        "k8s", "render", str(rec), "--max-model-len", "-5"
    )


FLEET = """name: t
gpus: [A10]
classes:
  - {name: a, model: Qwen/Qwen2.5-7B-Instruct, rate_rps: 1, input_tokens: 10, output_tokens: 256, %s}
"""


def test_fleet_refuses_p99_limits_and_unknown_dtypes(user_error: UserError, tmp_path: Path) -> None:
    p99 = _write(tmp_path / "p99.yaml", FLEET % "sla: {ttft_p99_ms: 100, tpot_p99_ms: 10}")
    line = user_error("fleet", str(p99))
    assert "fleets are sized on mean TTFT/TPOT" in line and "Tuple should have at least 1 item" not in line
    fp9 = _write(tmp_path / "fp9.yaml", FLEET % "dtypes: [fp9]")
    assert "unknown dtype 'fp9'" in user_error("fleet", str(fp9))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--rate", "inf"], "rate_rps: Input should be a finite number"),
        (["--rate", "1e9"], "rate_rps: Input should be less than or equal to 100000"),
        (["--concurrency", "100000000"], "concurrency: Input should be less than or equal to 100000"),
        (["--rate", "1", "--url", "http://256.256.256.256:80"], "is not a valid URL"),
        (
            ["--rate", "1", "--max-rate-under-slo", "--slo-ttft-p99-ms", "-5"],
            "error: --slo-ttft-p99-ms -5: Input should be greater than 0 (ms)",
        ),
        (
            ["--rate", "1", "--max-rate-under-slo", "--slo-tpot-p99-ms", "inf"],
            "error: --slo-tpot-p99-ms inf: Input should be a finite number (ms)",
        ),
    ],
)
def test_bench_serve_load_out_of_range(
    user_error: UserError, flags: list[str], expected: str, tmp_path: Path
) -> None:
    base = [
        "bench",
        "serve",
        "--model",
        "m",
        "--duration",
        "1",
        "--store",
        f"sqlite:///{tmp_path / 'r.sqlite'}",
    ]
    if "--url" not in flags:
        base += ["--url", "http://127.0.0.1:9"]
    assert expected in user_error(*base, *flags)


def test_flags_beside_a_scenario_are_refused_not_ignored(user_error: UserError, tmp_path: Path) -> None:
    line = user_error("recommend", "--example", "--model", "meta-llama/Llama-3.1-70B")
    assert "--model would be ignored: a scenario file (or --example) is the whole request" in line
    scenario = _write(
        tmp_path / "s.yaml",
        "model: meta-llama/Llama-3.1-8B\nhardware: {gpu: H100-SXM}\n"
        "workload: {input_tokens: 512, output_tokens: 128, concurrency: 8}\n",
    )
    assert "--gpu would be ignored" in user_error("fit", "--scenario", str(scenario), "--gpu", "T4")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--tp", "0"], "--tp must be >= 1, got 0"),
        (["--gpu", "NOPE"], "unknown GPU 'NOPE'"),
        (["--weight-dtype", "fp9"], "unknown dtype 'fp9'"),
    ],
)
def test_calibrate_labels_must_be_real(user_error: UserError, flags: list[str], expected: str) -> None:
    assert expected in user_error("calibrate", str(RESULTS_CSV), *flags)


def test_empty_lists_and_bad_inventory(user_error: UserError, tmp_path: Path) -> None:
    line = user_error(
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--rate",
        "1",
        "--gpus",
        ",,",
    )
    assert "--gpus ',,' names nothing" in line
    fleet = _write(tmp_path / "f.yaml", FLEET % "sla: {tpot_ms: 100}")
    fractional = _write(tmp_path / "inv.json", '{"totals": [{"product": "A10", "available": 2.7}]}')
    assert "totals[0].available must be a whole number >= 0, got 2.7" in user_error(
        "fleet", str(fleet), "--inventory", str(fractional)
    )
    other = _write(tmp_path / "other.json", '{"x": 1}')
    assert "missing key 'totals'" in user_error("fleet", str(fleet), "--inventory", str(other))


def test_servers_name_the_host_or_port_they_cannot_use(user_error: UserError) -> None:
    assert "--host '999.1.1.1' does not resolve" in user_error(
        "web", "--host", "999.1.1.1", "--port", "18799"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert f"cannot listen on 127.0.0.1:{port}" in user_error("mock-server", "--port", port)


def test_training_recommend_refuses_serving_flags(user_error: UserError) -> None:
    line = user_error(
        "recommend",
        "--task",
        "finetune",
        "--model",
        "Qwen/Qwen2.5-7B-Instruct",
        "--seq-len",
        "2048",
        "--tokens",
        "1e8",
        "--rate",
        "5",
        "--budget",
        "10",
    )
    assert "--rate, --budget would be ignored by --task finetune" in line


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("rate_rps: 0.5", "rate_rps: true"), "workload.rate_rps"),
        (("count: 5", "count: yes"), "hardware.count"),
        (("tpot_p99_ms: 100", "tpot_p99_ms: false"), "sla.tpot_p99_ms"),
    ],
)
def test_yaml_booleans_are_not_numbers(
    user_error: UserError, tmp_path: Path, edit: tuple[str, str], field: str
) -> None:
    # YAML reads yes/true/false as booleans; pydantic's lax mode would take them as 1/0 silently.
    text = (ROOT / "docs" / "playbooks" / "inputs" / "06-t4x5.yaml").read_text(encoding="utf-8")
    assert edit[0] in text
    bad = _write(tmp_path / "bool.yaml", text.replace(edit[0], edit[1]))
    line = user_error("simulate", str(bad))
    assert f"{field}: expected a number, got a boolean (true/false)" in line

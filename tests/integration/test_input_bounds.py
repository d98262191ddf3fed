"""Work is bounded by validated sizes (issue 22, items 1 and 2): an absurd model size, GPU count or
training size, and an integer over Python's 4,300-digit conversion limit, is one error line naming
the field (exit 1) on the CLI and a 4xx naming it on the web, never a traceback, a 500 or an
enumeration that runs for minutes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplan.interfaces.web.app import create_app

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CONFIG = ROOT / "src" / "gpuplan" / "data" / "models" / "configs" / "meta-llama__Llama-3.1-8B.json"
HUGE = "9" * 5000
"""An integer literal over Python's int-string conversion limit (4,300 digits)."""
BIG = 10**400
"""An integer no float holds (``float(BIG)`` overflows)."""
TRAIN = {"model": "Qwen/Qwen2.5-7B-Instruct", "seq_len": 2048, "method": "lora"}


def _config(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(LLAMA_CONFIG.read_text(encoding="utf-8"))
    return config | changes


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.mark.parametrize("heads", [10**8, 2**40 - 1])
@pytest.mark.parametrize("command", ["fit", "recommend"])
def test_absurd_head_counts_are_refused_at_once(
    user_error: Any, tmp_path: Path, heads: int, command: str
) -> None:
    """Before: ``fit --count 3`` at 10^8 heads took 10 s, 2^40 - 1 heads never answered (a divisor
    enumeration up to the head count in the TP hint)."""
    config = _config(num_attention_heads=heads, num_key_value_heads=heads, head_dim=128)
    path = _write(tmp_path / "config.json", json.dumps(config))
    flags = (
        ["--gpu", "H100-SXM", "--count", "3"]
        if command == "fit"
        else ["--input-tokens", "100", "--output-tokens", "100", "--rate", "1", "--gpus", "H100-SXM"]
    )
    line = user_error(command, "--model", str(path), *flags)
    assert f"'num_attention_heads' is {heads} (expected an int <= 4096)" in line


@pytest.mark.parametrize(
    ("flag", "bound"), [("--context", "1,073,741,824"), ("--count", "200,000"), ("--tp", "1,024")]
)
def test_fit_flags_past_their_bound_name_the_flag(user_error: Any, flag: str, bound: str) -> None:
    line = user_error("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", flag, str(BIG))
    assert line == f"error: {flag} must be a whole number <= {bound}, got about 10^400"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--epochs", "1", "--samples", str(BIG)],
            "--samples must be a whole number <= 1,000,000,000,000,000",
        ),
        (
            ["--tokens", "1e9", "--global-batch", str(BIG)],
            "--global-batch: Input should be less than or equal",
        ),
        (["--tokens", "1e30"], "tokens: Input should be less than or equal to 1000000000000000"),
    ],
)
def test_train_plan_sizes_past_their_bound_name_the_flag(
    user_error: Any, flags: list[str], expected: str
) -> None:
    line = user_error(
        "train-plan", *[a for k, v in TRAIN.items() for a in (f"--{k.replace('_', '-')}", v)], *flags
    )
    assert expected in line


def test_over_long_integers_in_a_config_json_name_the_key(user_error: Any, tmp_path: Path) -> None:
    text = json.dumps(_config()).replace('"hidden_size": 4096', f'"hidden_size": {HUGE}')
    path = _write(tmp_path / "config.json", text)
    assert "'hidden_size' is Infinity" in user_error("fit", "--model", str(path), "--gpu", "H100-SXM")


@pytest.mark.parametrize("command", ["predict", "recommend"])
def test_over_long_integers_in_a_scenario_name_the_field(
    user_error: Any, tmp_path: Path, command: str
) -> None:
    doc = (
        "model: meta-llama/Llama-3.1-8B\n"
        f"hardware: {{gpu: H100-SXM, count: {HUGE}}}\n"
        "workload: {input_tokens: 100, output_tokens: 100, rate_rps: 1}\n"
    )
    line = user_error(command, str(_write(tmp_path / "sc.yaml", doc)))
    assert "sc.yaml: hardware.count: Input should be a finite number" in line


def test_over_long_integers_in_a_jsonl_trace_name_the_line(user_error: Any, tmp_path: Path) -> None:
    _write(tmp_path / "t.jsonl", f'{{"arrival_s": 0, "input_tokens": {HUGE}, "output_tokens": 10}}\n')
    doc = (
        "model: meta-llama/Llama-3.1-8B\nhardware: {gpu: H100-SXM}\narrival: {kind: trace, trace: t.jsonl}\n"
    )
    line = user_error("simulate", str(_write(tmp_path / "sc.yaml", doc)))
    assert "t.jsonl line 1: token counts must be whole numbers" in line and "got inf" in line


def test_absurd_head_counts_in_a_pasted_config_are_a_400(client: TestClient) -> None:
    config = _config(num_attention_heads=2**40 - 1, num_key_value_heads=2**40 - 1, head_dim=128)
    body = {"model": "x", "gpu": "H100-SXM", "count": 2, "config_json": config}
    answer = client.post("/api/fit", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == "config_json"
    assert "'num_attention_heads' is 1099511627775 (expected an int <= 4096)" in answer.json()["error"]


@pytest.mark.parametrize(
    ("path", "body", "field", "expected"),
    [
        (
            "/api/fit",
            {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "context": BIG},
            None,
            "--context",
        ),
        (
            "/api/fit",
            {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "context": 1e400},
            "context",
            "",
        ),
        ("/api/train-plan", {**TRAIN, "epochs": 1, "samples": BIG}, "samples", "--samples"),
        ("/api/train-plan", {**TRAIN, "tokens": 1e9, "global_batch": BIG}, "global_batch", "global_batch"),
        ("/api/train-plan", {**TRAIN, "tokens": 1e9, "seq_len": BIG}, "seq_len", "seq_len"),
    ],
    ids=["fit-context-int", "fit-context-1e400", "train-samples", "train-global-batch", "train-seq-len"],
)
def test_unbounded_numbers_on_the_web_are_4xx_naming_the_field(
    client: TestClient, path: str, body: dict[str, Any], field: str | None, expected: str
) -> None:
    """Before: OverflowError 500s (``int too large to convert to float``)."""
    content = json.dumps(body).replace("Infinity", "1e400")
    answer = client.post(path, content=content, headers={"content-type": "application/json"})
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()
    assert error["field"] == field and expected in error["error"] and "\n" not in error["error"]
    assert len(error["error"]) < 200  # a 400-digit number is shown by its size

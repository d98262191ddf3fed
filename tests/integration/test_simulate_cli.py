"""``gpuplan simulate``: JSON contract, trace in and out, the optional plot, and one-line errors."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]

SCENARIO = """\
model: meta-llama/Llama-3.1-8B
hardware: {gpu: H100-SXM, count: 2}
workload:
  arrival: {kind: poisson, rate_rps: 15}
  input_tokens: {kind: lognormal, mean: 800, std: 300}
  output_tokens: {kind: uniform, low: 20, high: 200}
  num_requests: 400
  seed: 3
slo: {ttft_p99_ms: 1000, tpot_p99_ms: 60}
"""
TRACE_SCENARIO = """\
model: meta-llama/Llama-3.1-8B
hardware: {{gpu: H100-SXM}}
workload: {{arrival: {{kind: trace}}, trace: {trace}}}
"""


def _write(tmp_path: Path, text: str, name: str = "sc.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_json_contract_and_trace_out(invoke: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "requests.csv"
    run = invoke("simulate", str(_write(tmp_path, SCENARIO)), "--format", "json", "--trace-out", str(out))
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)["summary"]
    assert summary["completed"] == 400 and summary["truncated"] is None
    for key in ("ttft", "tpot", "itl", "e2e", "queueing"):
        assert summary[key]["p99_ms"] >= summary[key]["p50_ms"]
    assert summary["goodput_requests_per_s"] <= summary["requests_per_s"] + 1e-9
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 400 and float(rows[0]["e2e_s"]) >= float(rows[0]["ttft_s"])


def test_trace_workload_and_table(invoke: Invoke, tmp_path: Path) -> None:
    _write(
        tmp_path,
        '{"arrival_s": 0, "input_tokens": 100, "output_tokens": 5}\n'
        '{"arrival_s": 0.1, "input_tokens": 300, "output_tokens": 9}\n',
        "t.jsonl",
    )
    text = TRACE_SCENARIO.format(trace="t.jsonl")
    run = invoke("simulate", str(_write(tmp_path, text)))
    assert run.exit_code == 0, run.output
    assert "TTFT" in run.stdout and "2 of 2 requests completed" in run.stdout


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            SCENARIO.replace("rate_rps: 15", "rate_rps: 0"),
            "workload.rate_rps: Input should be greater than 0 (",
        ),
        (SCENARIO.replace("H100-SXM", "H999"), "unknown GPU"),
        (
            TRACE_SCENARIO.format(trace="no.csv"),
            "cannot read trace",
        ),
    ],
)
def test_bad_input_is_one_line(invoke: Invoke, tmp_path: Path, text: str, needle: str) -> None:
    run = invoke("simulate", str(_write(tmp_path, text)))
    assert run.exit_code == 1 and needle in run.error_line()


def test_plot_without_plotly_says_so(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("plotly", "plotly.graph_objects", "plotly.subplots"):
        monkeypatch.setitem(sys.modules, name, None)  # import of a None entry raises ImportError
    run = invoke("simulate", str(_write(tmp_path, SCENARIO)), "--plot", str(tmp_path / "p.html"))
    assert run.exit_code == 1 and "plotly" in run.error_line()


def test_plot_is_written_when_plotly_is_present(invoke: Invoke, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    plot = tmp_path / "p.html"
    run = invoke("simulate", str(_write(tmp_path, SCENARIO)), "--plot", str(plot))
    assert run.exit_code == 0, run.output
    assert plot.stat().st_size > 1000

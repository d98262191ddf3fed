"""``bench serve`` with the knobs named as ``vllm bench serve`` has them, through the CLI against the mock:
prefix_repetition, --percentile-metrics/--metric-percentiles, --goodput with e2el, --label/--metadata
shown by ``results list`` and ``results show``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app

PREFIX_WORDS, SUFFIX_WORDS, PREFIXES = 24, 6, 3
REQUESTS = 12


def _serve(runner: CliRunner, url: str, store: str, *extra: str) -> dict[str, object]:
    flags = ["--url", url, "--model", "m", "--concurrency", "2", "--num-prompts", str(REQUESTS)]
    flags += ["--output-tokens", "4", "--store", store, "--format", "json", *extra]
    res = runner.invoke(app, ["bench", "serve", *flags])
    assert res.exit_code == 0, res.output
    summary: dict[str, object] = json.loads(res.stdout)
    return summary


def test_prefix_workload_percentiles_goodput_and_tags_end_to_end(tmp_path: Path, mock_url: str) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    runner = CliRunner()
    summary = _serve(
        runner, mock_url, store,
        "--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", str(PREFIX_WORDS),
        "--prefix-repetition-num-prefixes", str(PREFIXES), "--prefix-repetition-suffix-len", str(SUFFIX_WORDS),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
        "--goodput", "ttft:60000 e2el:60000", "--label", "prefix-test", "--metadata", "tp=2",
    )  # fmt: skip
    assert summary["requests_completed"] == REQUESTS
    assert summary["input_tokens_mean"] == PREFIX_WORDS + SUFFIX_WORDS  # the mock counts the words it got
    selected = summary["selected_percentiles"]
    assert isinstance(selected, dict) and list(selected) == ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"]
    assert all(list(points) == ["p50", "p95", "p99"] for points in selected.values())
    assert summary["goodput_rps"] == summary["achieved_rate"]  # a minute's limits: every request within
    strict = _serve(runner, mock_url, store, "--goodput", "e2el:0.001")
    assert strict["goodput_rps"] == 0.0  # no request ends within a microsecond
    listed = runner.invoke(app, ["results", "list", "--store", store, "--format", "json"])
    configs = [run["config"] for run in json.loads(listed.stdout)]
    assert (configs[0]["label"], configs[0]["metadata"]) == ("prefix-test", {"tp": "2"})
    assert configs[0]["dataset"] == "prefix_repetition" and configs[1]["label"] is None
    table = runner.invoke(app, ["results", "list", "--store", store], env={"COLUMNS": "200"})
    assert "prefix-test, tp=2" in table.stdout
    shown = runner.invoke(app, ["results", "show", str(summary["run_id"]), "--store", store])
    assert "label, metadata: prefix-test, tp=2" in shown.stdout
    assert "p95" in shown.stdout  # the percentile the latency table lacks gets its own table


def test_bad_knobs_are_one_line_errors_naming_the_flag(tmp_path: Path, mock_url: str) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    base = ["bench", "serve", "--url", mock_url, "--model", "m", "--rate", "5", "--duration", "1"]
    base += ["--store", store]
    cases = {
        ("--goodput", "ttft:fast"): "--goodput",
        ("--percentile-metrics", "ttft,queue"): "--percentile-metrics",
        ("--metric-percentiles", "50,abc"): "--metric-percentiles",
        ("--metadata", "novalue"): "--metadata",
        ("--prefix-len", "8"): "--prefix-len",
        ("--slo-ttft-ms", "5", "--goodput", "ttft:5"): "--slo-ttft-ms",
        ("--gpu", "H999"): "unknown GPU 'H999'",
        ("--engine", "vlm"): "unknown engine 'vlm'",
        ("--tp", "0"): "--tp",
    }
    for flags, named in cases.items():
        res = CliRunner().invoke(app, [*base, *flags])
        assert res.exit_code == 1 and named in res.output, (flags, res.output)
        assert "Traceback" not in res.output

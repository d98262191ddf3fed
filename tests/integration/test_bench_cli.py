"""``gpuplan mock-server``/``bench serve``/``results`` through the CLI (JSON contract, export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app

CONTRACT = {
    "requests_completed",
    "requests_failed",
    "achieved_rate",
    "ttft_ms",
    "e2e_ms",
    "itl_ms",
    "output_tokens_per_s",
    "errors",
    "run_id",
}


def test_bench_serve_json_contract_and_results_commands(tmp_path: Path, mock_url: str) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "bench",
            "serve",
            "--url",
            mock_url,
            "--model",
            "m",
            "--rate",
            "20",
            "--duration",
            "1",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--store",
            store,
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert set(summary) >= CONTRACT
    assert {"mean", "p50", "p99"} <= set(summary["ttft_ms"]) and {"mean", "p99"} <= set(summary["itl_ms"])
    assert summary["requests_completed"] == 20
    listed = json.loads(runner.invoke(app, ["results", "list", "--store", store, "--format", "json"]).stdout)
    assert [r["run_id"] for r in listed] == [summary["run_id"]]
    shown = runner.invoke(app, ["results", "show", summary["run_id"][:10], "--store", store])
    assert shown.exit_code == 0 and "ttft_ms" in shown.stdout
    exported = runner.invoke(
        app, ["results", "export", summary["run_id"], "--store", store, "--format", "csv"]
    )
    assert exported.exit_code == 0 and len(exported.stdout.strip().splitlines()) == 21
    bad = runner.invoke(app, ["results", "export", "nope", "--store", store])
    assert bad.exit_code == 1


def test_rate_sweep_progress_bar_and_results_compare(tmp_path: Path, mock_url: str) -> None:
    url = mock_url
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "bench",
            "serve",
            "--url",
            url,
            "--model",
            "m",
            "--rates",
            "10,20",
            "--duration",
            "0.5",
            "--input-tokens",
            "8",
            "--output-tokens",
            "3",
            "--store",
            store,
            "--progress",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)
    table = runner.invoke(
        app,
        [
            "bench",
            "serve",
            "--url",
            url,
            "--model",
            "m",
            "--rates",
            "10",
            "--duration",
            "0.5",
            "--output-tokens",
            "3",
            "--store",
            store,
            "--no-progress",
        ],
    )
    assert table.exit_code == 0 and "sweep" in table.stdout
    assert [r["requests_completed"] for r in runs] == [5, 10]
    assert [r["target_rate"] for r in runs] == [10.0, 20.0]
    cmp = runner.invoke(
        app,
        [
            "results",
            "compare",
            runs[0]["run_id"],
            runs[1]["run_id"][:10],
            "--store",
            store,
            "--format",
            "json",
        ],
    )
    assert cmp.exit_code == 0, cmp.output
    out = json.loads(cmp.stdout)
    assert out["config_diff"]["rate_rps"] == [10.0, 20.0]
    shown = runner.invoke(app, ["results", "compare", runs[0]["run_id"], runs[1]["run_id"], "--store", store])
    assert shown.exit_code == 0 and "achieved_rate" in shown.stdout
    bad = runner.invoke(
        app, ["bench", "serve", "--url", url, "--model", "m", "--rates", "1,x", "--store", store]
    )
    assert bad.exit_code == 1


def _serve_table(url: str, store: str, *extra: str) -> str:
    """One ``bench serve`` run at 20 req/s for 1 s (4-token outputs), printed as the table."""
    flags = ["--url", url, "--model", "m", "--rate", "20", "--duration", "1", "--input-tokens", "8"]
    flags += ["--output-tokens", "4", "--store", store, "--no-progress", *extra]
    res = CliRunner().invoke(app, ["bench", "serve", *flags])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_bench_serve_table_shows_goodput_under_slo_limits(tmp_path: Path, mock_url: str) -> None:
    """The mock answers in TTFT 5 ms, ITL 1 ms: a 60 s TTFT limit holds every request, so goodput is the
    achieved rate; a 1 ms limit (below the server's own 5 ms) holds none, so goodput is 0. The printed
    goodput is the stored summary's ``goodput_rps``; without limits no goodput line is printed."""
    store = f"sqlite:///{tmp_path / 'g.sqlite'}"
    loose = _serve_table(mock_url, store, "--slo-ttft-ms", "60000", "--slo-tpot-ms", "60000")
    tight = _serve_table(mock_url, store, "--slo-ttft-ms", "1")
    plain = _serve_table(mock_url, store)
    runner = CliRunner()
    listed = json.loads(runner.invoke(app, ["results", "list", "--store", store, "--format", "json"]).stdout)
    shown = [
        json.loads(
            runner.invoke(app, ["results", "show", r["run_id"], "--store", store, "-f", "json"]).stdout
        )
        for r in listed
    ]
    goodputs = sorted(s["summary"]["goodput_rps"] for s in shown if s["summary"]["goodput_rps"] is not None)
    assert len(goodputs) == 2 and goodputs[0] == 0.0
    achieved = [s["summary"]["achieved_rate"] for s in shown if s["summary"]["goodput_rps"] == goodputs[1]]
    assert goodputs[1] == pytest.approx(achieved[0])
    assert f"goodput {goodputs[1]:.2f} req/s within the SLO" in loose
    assert f"of {achieved[0]:.2f} req/s achieved" in loose
    assert "goodput 0.00 req/s within the SLO" in tight
    assert "goodput" not in plain
    sweep_flags = ["--url", mock_url, "--model", "m", "--rates", "10", "--duration", "0.5"]
    sweep_flags += ["--output-tokens", "3", "--slo-ttft-ms", "60000", "--store", store, "--no-progress"]
    sweep = CliRunner().invoke(app, ["bench", "serve", *sweep_flags])
    assert sweep.exit_code == 0 and "goodput" in sweep.stdout

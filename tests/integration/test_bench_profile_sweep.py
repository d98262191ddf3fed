"""``bench serve --profile sweep --rate N`` (GuideLLM's sweep) against a mock of known capacity: the
synchronous and saturation rates it finds are the mock's, the rate levels lie evenly between, every level
is a stored run, and ``results report`` draws the rate levels as one curve."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app

SLOTS, TTFT_MS, ITL_MS, OUTPUT_TOKENS = 2, 80.0, 20.0, 4
SERVICE_S = (TTFT_MS + (OUTPUT_TOKENS - 1) * ITL_MS) / 1e3
"""One request's time in the mock: its first token at TTFT, the other three ITL apart (140 ms). Long
against the client's and the mock's own CPU time per request (~9 ms on a loaded 2-core runner, where
a 35 ms service read the saturated rate at half the mock's), so the rates found are the mock's."""
PROMPTS = 30


@pytest.fixture()
def slow_mock(mock_server: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    """A mock serving SLOTS streams at once (more queue): 1/SERVICE_S req/s one at a time, SLOTS times
    that saturated."""
    with mock_server(
        "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--max-concurrency", str(SLOTS)
    ) as url:
        yield url


def test_a_sweep_finds_the_mocks_rates_and_stores_one_curve(tmp_path: Path, slow_mock: str) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "bench", "serve", "--url", slow_mock, "--model", "m", "--profile", "sweep", "--rate", "5",
            "--num-prompts", str(PROMPTS), "--input-tokens", "8", "--output-tokens", str(OUTPUT_TOKENS),
            "--arrival", "constant", "--store", store, "--format", "json",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    sweep = json.loads(res.stdout)
    one_at_a_time_rps, saturated_rps = 1 / SERVICE_S, SLOTS / SERVICE_S  # 7.1 and 14.3 req/s
    assert 0.75 * one_at_a_time_rps <= sweep["synchronous_rate_rps"] <= 1.02 * one_at_a_time_rps
    assert 0.75 * saturated_rps <= sweep["saturation_rate_rps"] <= 1.02 * saturated_rps
    low, high = sweep["synchronous_rate_rps"], sweep["saturation_rate_rps"]
    assert sweep["rates_rps"] == pytest.approx([low + (high - low) * k / 3 for k in (1, 2, 3)])
    levels = sweep["levels"]
    assert [lv["level"] for lv in levels] == ["synchronous", "throughput", "rate 1/3", "rate 2/3", "rate 3/3"]
    assert [lv["summary"]["mode"] for lv in levels] == ["concurrency", "burst", "rate", "rate", "rate"]
    assert all(lv["summary"]["requests_completed"] == PROMPTS for lv in levels)
    assert [lv["summary"]["target_rate"] for lv in levels[2:]] == pytest.approx(sweep["rates_rps"])

    listed = json.loads(runner.invoke(app, ["results", "list", "--store", store, "--format", "json"]).stdout)
    assert {run["config"]["metadata"]["sweep"] for run in listed} == {sweep["sweep_id"]}
    rate_ids = [lv["summary"]["run_id"] for lv in levels[2:]]
    report = runner.invoke(app, ["results", "report", *rate_ids, "--store", store, "--format", "csv"])
    assert report.exit_code == 0, report.output
    curves = {row["curve"] for row in csv.DictReader(io.StringIO(report.stdout))}
    assert len(curves) == 1 and "rate" in curves.pop()  # the rate levels differ only in load: one curve


def test_a_sweep_with_a_load_of_its_own_is_one_line_error(tmp_path: Path) -> None:
    base = ["bench", "serve", "--url", "http://127.0.0.1:9", "--model", "m", "--profile", "sweep"]
    base += ["--store", f"sqlite:///{tmp_path / 'r.sqlite'}"]
    cases = {
        ("--concurrency", "4"): "drop --concurrency",
        ("--rates", "1,2"): "drop --rates",
        ("--request-rate", "inf", "--num-prompts", "5"): "drop --request-rate inf",
        ("--rate", "4.5"): "--rate 4.5 with --profile sweep is the number of levels",
    }
    for flags, named in cases.items():
        res = CliRunner().invoke(app, [*base, *flags])
        assert res.exit_code == 1 and named in res.output, (flags, res.output)
        assert "Traceback" not in res.output

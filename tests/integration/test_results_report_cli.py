"""``gpuplan results report`` end to end: two ``bench serve`` runs at two loads against the mock server,
then the report as HTML (opened in headless Chromium: charts drawn, tables filled, the predicted curve
there), CSV and Markdown, and the one-line errors of bad ids and flags.

The browser test skips without Debian's ``chromium`` + ``chromium-driver`` and Selenium, as
tests/integration/test_web_browser.py does.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app
from gpuplan.interfaces.cli.report_views import CSV_METRICS

SRC = str(Path(__file__).resolve().parents[2] / "src")
MOCK_TTFT_MS = 5.0
RATES_RPS = (10.0, 40.0)
DEPLOYMENT = ("--gpu", "H100-SXM", "--model", "meta-llama/Llama-3.1-8B")
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")

pytest.importorskip("plotly")


@dataclass(frozen=True)
class Runs:
    store: str
    ids: tuple[str, ...]
    folder: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Two open-loop runs (10 and 40 req/s, 1 s each) against a mock server (TTFT 5 ms, ITL 1 ms)."""
    folder = tmp_path_factory.mktemp("report")
    store = f"sqlite:///{folder / 'r.sqlite'}"
    mock = subprocess.Popen(
        [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", "--ttft-ms", "5", "--itl-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": SRC},
    )
    try:
        assert mock.stdout is not None
        url = mock.stdout.readline().split()[-1]
        ids = []
        for rate in RATES_RPS:
            args = ["bench", "serve", "--url", url, "--model", "m", "--rate", str(rate), "--duration", "1"]
            args += ["--input-tokens", "32", "--output-tokens", "8", "--store", store, "--format", "json"]
            res = CliRunner().invoke(app, args)
            assert res.exit_code == 0, res.output
            ids.append(json.loads(res.stdout)["run_id"])
        yield Runs(store, tuple(ids), folder)
    finally:
        mock.terminate()
        mock.wait(10)


def _report(invoke: Callable[..., Any], runs: Runs, *args: str) -> Any:
    run = invoke("results", "report", *(i[:10] for i in runs.ids), "--store", runs.store, *args)
    assert run.exit_code == 0, run.output
    return run


def test_html_report_has_the_charts_tables_and_simulated_overlay(
    invoke: Callable[..., Any], runs: Runs
) -> None:
    page = runs.folder / "report.html"
    run = _report(invoke, runs, *DEPLOYMENT, "-o", str(page))
    text = page.read_text(encoding="utf-8").replace("\\u002f", "/")  # plotly escapes / in its JSON
    for element in ("chart-latency-rate", "chart-throughput-rate", "chart-cdf", "table-conditions"):
        assert f'id="{element}"' in text
    assert '<table id="table-predicted">' in text
    assert "predicted p50: meta-llama/Llama-3.1-8B on 1x H100-SXM (vllm, bf16)" in text
    assert all(run_id[:12] in text for run_id in runs.ids)
    assert "<script src=" not in text  # plotly.js embedded: the page works offline
    assert run.stderr == "" and run.stdout == ""


def test_without_a_deployment_the_report_says_how_to_add_it(invoke: Callable[..., Any], runs: Runs) -> None:
    run = _report(invoke, runs)
    assert "predicted p50:" not in run.stdout and 'id="chart-latency-rate"' in run.stdout
    assert "record no GPU or model of the server" in run.stdout
    assert "--gpu GPU --model HF_ID" in run.stderr


def test_csv_has_a_row_per_run_and_metric(invoke: Callable[..., Any], runs: Runs) -> None:
    rows = list(csv.DictReader(io.StringIO(_report(invoke, runs, *DEPLOYMENT, "-f", "csv").stdout)))
    assert len(rows) == len(RATES_RPS) * len(CSV_METRICS)
    by = {(r["run_id"], r["metric"]): r for r in rows}
    for run_id, rate in zip(runs.ids, RATES_RPS, strict=True):
        assert float(by[(run_id, "achieved_rate")]["measured"]) == pytest.approx(rate, rel=0.3)
        ttft = by[(run_id, "ttft_ms.p50")]
        assert (
            MOCK_TTFT_MS <= float(ttft["measured"]) < 10 * MOCK_TTFT_MS
        )  # the mock holds the first token 5 ms
        assert float(ttft["predicted"]) > 0 and ttft["deployment"].startswith("meta-llama/Llama-3.1-8B")


def test_markdown_with_png_charts(invoke: Callable[..., Any], runs: Runs) -> None:
    text = _report(invoke, runs, "-f", "md").stdout
    assert text.startswith("# gpuplan results report") and "## Measured summary" in text
    assert all(f"| {run_id[:12]} |" in text for run_id in runs.ids)
    if CHROMIUM is None:
        return
    pytest.importorskip("kaleido")
    md = runs.folder / "r.md"
    _report(invoke, runs, *DEPLOYMENT, "-f", "md", "--png", "-o", str(md))
    png = runs.folder / "r-latency-rate.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![Latency vs load (rate)](r-latency-rate.png)" in md.read_text(encoding="utf-8")


def test_bad_ids_and_flags_are_one_line_errors(user_error: Callable[..., str], runs: Runs) -> None:
    store = ("--store", runs.store)
    line = user_error("results", "report", runs.ids[0][:10], "nope", *store)
    assert (
        "no run matches 'nope'" in line
        and f"see the ids with gpuplan results list --store {runs.store}" in line
    )
    assert "--format 'pdf' is not one of html, md, csv" in user_error(
        "results", "report", "x", "-f", "pdf", *store
    )
    assert "--png" in user_error("results", "report", runs.ids[0], "--png", *store)
    assert "--gpu: unknown GPU 'H999'" in user_error(
        "results", "report", runs.ids[0], "--gpu", "H999", *store
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,2200")
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_browser_opens_the_report_and_finds_plots_and_tables(
    invoke: Callable[..., Any], runs: Runs, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = runs.folder / "browser.html"
    _report(invoke, runs, *DEPLOYMENT, "-o", str(page))
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(
        lambda d: (
            d.execute_script("return document.querySelectorAll('.js-plotly-plot .main-svg').length") >= 3
        )
    )
    drawn = browser.execute_script(
        "return ['latency-rate', 'throughput-rate', 'cdf'].map(id => {"
        " const el = document.getElementById('chart-' + id);"
        " return [id, el.data.length, el.data.map(t => t.name), el.querySelectorAll('path.js-line').length]; })"
    )
    charts = {name: (count, names, lines) for name, count, names, lines in drawn}
    count, names, lines = charts["latency-rate"]
    assert count == 16 and lines >= 16  # 4 panels x measured/predicted x p50/p99, each line drawn
    assert sum(n.startswith("predicted p99: meta-llama/Llama-3.1-8B") for n in names) == 4
    assert charts["cdf"][0] == 2 * len(RATES_RPS)  # TTFT and TPOT per run
    rows = browser.find_elements(By.CSS_SELECTOR, "#table-summary tr")
    assert len(rows) == 1 + len(RATES_RPS)
    cells = [c.text for c in rows[1].find_elements(By.TAG_NAME, "td")]
    assert cells[0] == runs.ids[0][:12] and cells[2] == "0"  # no failed request
    predicted = browser.find_elements(By.CSS_SELECTOR, "#table-predicted tr")
    assert len(predicted) == 1 + len(RATES_RPS)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_without_plotly_html_is_refused_in_one_line_and_csv_still_works(
    user_error: Callable[..., str], invoke: Callable[..., Any], runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)  # import plotly.graph_objects fails
    line = user_error("results", "report", runs.ids[0], "--store", runs.store)
    assert line == "error: plots need plotly, which is not installed (pip install 'gpuplan[plot]')"
    assert _report(invoke, runs, "-f", "csv").stdout.startswith("run_id,curve,mode,")

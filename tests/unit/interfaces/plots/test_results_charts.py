"""``results report``'s charts draw the report's numbers: measured P50/P99 and the predicted curve per
load axis, throughput, and CDFs that climb to 1."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

from datetime import UTC, datetime

from gpuplan.adapters.store.database import RunInfo
from gpuplan.interfaces.plots import results as charts
from gpuplan.usecases.results_report.model import Curve, Deployment, Predicted, Report, RunView

DEP = Deployment(gpu="H100-SXM", model="meta-llama/Llama-3.1-8B")
PRED = Predicted(4.0, {k: {"p50": 20.0, "p99": 25.0} for k in charts.LATENCY_TITLES}, 300.0, 3.9)


def _view(run_id: str, load: float, cdf: tuple[float, ...], tpot: tuple[float, ...]) -> RunView:
    """A rate run whose every latency has P50 10 ms and P99 12 ms, at 320 output tokens/s."""
    run = RunInfo(
        run_id=run_id,
        kind="serve",
        status="completed",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
        finished_at=None,
        tool_version="0",
        config={"model": "m"},
        conditions={},
        summary={"output_tokens_per_s": 320.0, "achieved_rate": load}
        | {k: {"p50": 10.0, "p99": 12.0} for k in charts.LATENCY_TITLES},
    )
    return RunView(run, "rate", load, cdf, tpot, DEP, "curve A", None)


def _report() -> Report:
    low, high = _view("low00000", 4.0, (1.0, 2.0), (3.0,)), _view("high0000", 9.0, (1.0, 2.0, 4.0), ())
    far = Predicted(9.0, {k: {"p50": 40.0, "p99": 80.0} for k in charts.LATENCY_TITLES}, 500.0, 8.0)
    curve = Curve("curve A", "rate", (low, high), DEP, (PRED, far))
    return Report(runs=(low, high), curves=(curve,))


def test_latency_chart_draws_measured_and_predicted_per_panel() -> None:
    fig = charts.latency_figure(_report(), "rate")
    names = [t.name for t in fig.data]
    assert len(fig.data) == 4 * 4  # 4 panels x (measured, predicted) x (p50, p99)
    ttft = [t for t in fig.data if t.xaxis == "x"]
    measured_p99 = next(t for t in ttft if t.name.startswith("measured p99"))
    assert list(measured_p99.x) == [4.0, 9.0] and list(measured_p99.y) == [12.0, 12.0]
    predicted_p50 = next(t for t in ttft if t.name.startswith("predicted p50"))
    assert list(predicted_p50.x) == [4.0, 9.0] and list(predicted_p50.y) == [20.0, 40.0]
    assert any("H100-SXM" in n for n in names)
    assert fig.layout.xaxis.title.text == charts.LOAD_TITLES["rate"]


def test_throughput_chart_and_cdfs() -> None:
    report = _report()
    fig = charts.throughput_figure(report, "rate")
    tokens = [t for t in fig.data if t.xaxis == "x"]
    assert [list(t.y) for t in tokens] == [[320.0, 320.0], [300.0, 500.0]]
    requests = [t for t in fig.data if t.xaxis == "x2"]
    assert [list(t.y) for t in requests] == [[4.0, 9.0], [3.9, 8.0]]
    cdf = charts.cdf_figure(report)
    ttft = [t for t in cdf.data if t.xaxis == "x"]
    assert [list(t.y) for t in ttft] == [[0.5, 1.0], [1 / 3, 2 / 3, 1.0]]
    assert [t for t in cdf.data if t.xaxis == "x2" and t.name == "run high0000"] == []  # no TPOT values


def test_report_charts_one_pair_per_load_axis_then_cdfs() -> None:
    found = charts.report_charts(_report())
    assert [c.id for c in found] == ["latency-rate", "throughput-rate", "cdf"]
    first, second = (charts.chart_html(c, include_plotlyjs=i == 0) for i, c in enumerate(found[:2]))
    assert 'id="chart-latency-rate"' in first and len(first) > 1_000_000  # plotly.js embedded once
    assert len(second) < 100_000 and "<script src=" not in first + second  # nothing fetched

"""``results report`` documents from a hand-built report: CSV (one row per run and metric, measured
beside predicted), Markdown tables, and an HTML page whose cells are escaped."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

from gpuplan.adapters.store.database import RunInfo
from gpuplan.interfaces.cli import report_views as views
from gpuplan.usecases.results_report.model import LATENCIES, Curve, Deployment, Predicted, Report, RunView

DEP = Deployment(gpu="H100-SXM", model="meta-llama/Llama-3.1-8B")


def _summary(ttft_p50_ms: float) -> dict[str, Any]:
    dist = {
        "mean": ttft_p50_ms,
        "p50": ttft_p50_ms,
        "p90": ttft_p50_ms + 1,
        "p99": ttft_p50_ms + 2,
        "max": 99,
    }
    return {
        "mode": "rate",
        "achieved_rate": 4.0,
        "requests_completed": 40,
        "requests_failed": 1,
        "output_tokens_per_s": 320.0,
        "goodput_rps": None,
        **{key: dist for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")},
    }


def _view(run_id: str, model: str, predicted: Predicted | None) -> RunView:
    run = RunInfo(
        run_id=run_id,
        kind="serve",
        status="completed",
        created_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        finished_at=None,
        tool_version="0.1.0",
        config={"model": model, "rate_rps": 4.0, "input_tokens": 64, "output_tokens": 8, "api": "chat"},
        conditions={"host": "client-1", "target": "http://127.0.0.1:8000"},
        summary=_summary(10.0),
    )
    return RunView(run, "rate", 4.0, (1.0, 2.0), (3.0,), DEP if predicted else None, "curve A", predicted)


PRED = Predicted(
    load=4.0,
    latency_ms={k: {"mean": 19.0, "p50": 20.0, "p90": 21.0, "p99": 25.0} for k in LATENCIES},
    output_tokens_per_s=300.0,
    requests_per_s=3.9,
)
REPORT = Report(
    runs=(_view("aaaa1111bbbb2222", "m|<b>x</b>", PRED), _view("cccc3333", "m2", None)),
    curves=(Curve("curve A", "rate", (), DEP, (PRED,)),),
    notes=("run cccc3333 records no GPU",),
)


def test_csv_has_one_row_per_run_and_metric_with_measured_and_predicted() -> None:
    rows = list(csv.DictReader(io.StringIO(views.csv_report(REPORT))))
    assert len(rows) == 2 * len(views.CSV_METRICS)
    by = {(r["run_id"], r["metric"]): r for r in rows}
    ttft = by[("aaaa1111bbbb2222", "ttft_ms.p99")]
    assert (float(ttft["measured"]), float(ttft["predicted"]), ttft["unit"]) == (12.0, 25.0, "ms")
    assert float(by[("aaaa1111bbbb2222", "output_tokens_per_s")]["predicted"]) == 300.0
    assert by[("aaaa1111bbbb2222", "requests_failed")]["predicted"] == ""
    assert by[("cccc3333", "ttft_ms.p50")]["predicted"] == "" and by[("cccc3333", "ttft_ms.p50")]["measured"]
    assert by[("cccc3333", "ttft_ms.p50")]["deployment"] == ""


def test_markdown_tables_escape_pipes_and_link_images() -> None:
    text = views.markdown_report(REPORT, [("Latency vs load (rate)", "r-latency-rate.png")])
    assert "| aaaa1111bbbb | 2026-12-01 12:00 | completed | 4 req/s |" in text
    assert "m\\|<b>x</b>" in text
    assert "- run cccc3333 records no GPU" in text
    assert "![Latency vs load (rate)](r-latency-rate.png)" in text
    # measured TTFT p50 10 against predicted 20: the ratio 0.5
    assert (
        "| aaaa1111bbbb | meta-llama/Llama-3.1-8B on 1x H100-SXM (vllm, bf16) | 4 | 10 | 20 | 0.5 |" in text
    )
    assert "cccc3333 | -" not in text.split("Measured vs predicted")[1]


def test_html_page_escapes_cells_and_carries_the_charts() -> None:
    page = views.html_report(REPORT, [("Latency", "<div id='chart-latency-rate'></div>")])
    assert "m|&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert '<table id="table-conditions">' in page and '<table id="table-summary">' in page
    assert "<div id='chart-latency-rate'></div>" in page
    assert '<ul class="notes" id="notes"><li>run cccc3333 records no GPU</li></ul>' in page


def test_without_any_prediction_the_prediction_table_is_left_out() -> None:
    bare = Report(runs=(REPORT.runs[1],), curves=())
    assert [t[0] for t in views.tables(bare)] == ["conditions", "summary"]
    assert [t[0] for t in views.tables(REPORT)] == ["conditions", "summary", "predicted"]

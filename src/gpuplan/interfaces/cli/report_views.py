"""``gpuplan results report`` as a document: HTML (charts and tables in one offline page), Markdown
(tables, and links to PNG charts when written) or CSV (one row per run and metric, measured beside
predicted). Renders a :class:`gpuplan.usecases.results_report.model.Report`; computes nothing.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from typing import Any

from gpuplan.interfaces.cli.server_rows import LATENCY_HEADERS, latency_rows
from gpuplan.usecases.results_report.model import LATENCIES, Report, RunView

Table = tuple[str, str, list[str], list[list[str]]]
"""(element id, title, headers, rows) of one table, every cell already text."""
CSV_COLUMNS = (
    "run_id",
    "curve",
    "mode",
    "target_rate_rps",
    "concurrency",
    "achieved_rate_rps",
    "metric",
    "unit",
    "measured",
    "predicted",
    "deployment",
)
CSV_METRICS: tuple[tuple[str, str | None, str], ...] = (
    *((key, stat, "ms") for key in LATENCIES for stat in ("mean", "p50", "p90", "p99")),
    ("output_tokens_per_s", None, "tokens/s"),
    ("achieved_rate", None, "req/s"),
    ("goodput_rps", None, "req/s"),
    ("requests_completed", None, "requests"),
    ("requests_failed", None, "requests"),
)
"""The metrics of the CSV: (stored summary key, statistic, unit)."""
PAGE_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1400px}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.notes li{margin:.3em 0}"
)


def _num(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"


def _cell(value: object) -> str:
    return value if isinstance(value, str) else _num(value if isinstance(value, int | float) else None)


def _load(view: RunView) -> str:
    cfg = view.run.config
    if view.mode == "rate":
        return f"{_num(cfg.get('rate_rps'))} req/s {cfg.get('arrival', '')}".strip()
    if view.mode == "concurrency":
        return f"{cfg.get('concurrency')} clients"
    return "request-rate inf" if view.mode == "burst" else str(cfg.get("trace_path") or view.mode)


def conditions_table(report: Report) -> Table:
    """Each run's conditions: when, what load, which workload, against what, on what deployment."""
    rows = []
    for v in report.runs:
        r, cfg = v.run, v.run.config
        rows.append(
            [
                r.run_id[:12],
                r.created_at.strftime("%Y-%m-%d %H:%M"),
                r.status,
                _load(v),
                _num(cfg.get("duration_s")),
                f"{cfg.get('input_tokens')} / {cfg.get('output_tokens')}",
                str(cfg.get("model")),
                str(cfg.get("api")),
                str(r.conditions.get("target") or cfg.get("url")),
                str(r.conditions.get("host", "-")),
                v.deployment.label if v.deployment else "not recorded",
                r.tool_version,
            ]
        )
    headers = ["run", "created (UTC)", "status", "load", "duration s", "in / out tokens", "served model"]
    headers += ["api", "target", "client host", "deployment", "gpuplan"]
    return ("conditions", "Conditions", headers, rows)


def summary_table(report: Report) -> Table:
    """Each run's measured summary: counts, rates and the P50/P99 latencies."""
    rows = []
    for v in report.runs:
        row = [v.run.run_id[:12], f"{v.measured('requests_completed') or 0:.0f}"]
        row += [f"{v.measured('requests_failed') or 0:.0f}", _num(v.measured("achieved_rate"))]
        row += [_num(v.measured("output_tokens_per_s")), _num(v.measured("goodput_rps"))]
        row += [_num(v.measured(key, stat)) for key in LATENCIES for stat in ("p50", "p99")]
        rows.append(row)
    headers = ["run", "ok", "failed", "achieved req/s", "output tok/s", "goodput req/s"]
    headers += [
        f"{key.removesuffix('_ms').upper()} {stat} ms" for key in LATENCIES for stat in ("p50", "p99")
    ]
    return ("summary", "Measured summary", headers, rows)


def server_table(report: Report) -> Table:
    """Server-side (``/metrics`` histograms) beside client-side latency, for the runs that scraped it."""
    rows = []
    for v in report.runs:
        view = v.summary.get("server_vs_client")
        for row in latency_rows(view) if isinstance(view, dict) else ():
            rows.append([v.run.run_id[:12], *(_cell(c) for c in row)])
    return ("server", "Server-side vs client-side latency (ms)", ["run", *LATENCY_HEADERS], rows)


def prediction_table(report: Report) -> Table:
    """Measured against predicted at each run's own load (runs with a known deployment)."""
    rows = []
    for v in report.runs:
        p = v.predicted
        if p is None:
            continue
        row = [v.run.run_id[:12], v.deployment.label if v.deployment else "-", _num(p.load)]
        for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
            measured, predicted = v.measured(key, "p50"), p.latency_ms[key]["p50"]
            ratio = measured / predicted if measured is not None and predicted else None
            row += [_num(measured), _num(predicted), _num(ratio, 3)]
        row += [_num(v.measured("output_tokens_per_s")), _num(p.output_tokens_per_s)]
        rows.append(row)
    headers = ["run", "deployment", "simulated load"]
    for name in ("TTFT", "TPOT", "E2E"):
        headers += [f"{name} p50 measured", "predicted", "measured / predicted"]
    headers += ["output tok/s measured", "predicted"]
    return ("predicted", "Measured vs predicted (gpuplan simulate) at each run's load", headers, rows)


def tables(report: Report) -> list[Table]:
    found = [conditions_table(report), summary_table(report)]
    optional = (server_table(report), prediction_table(report))
    return found + [table for table in optional if table[3]]


def _html_table(table: Table) -> str:
    slug, title, headers, rows = table
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<h2>{html.escape(title)}</h2>\n<table id="table-{slug}"><tr>{head}</tr>{body}</table>\n'


def _notes_html(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f'<h2>Notes</h2>\n<ul class="notes" id="notes">{items}</ul>\n'


def html_report(report: Report, charts: Sequence[tuple[str, str]]) -> str:
    """One standalone page: notes, tables, then each (title, chart ``<div>``)."""
    ids = ", ".join(v.run.run_id[:12] for v in report.runs)
    parts = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>gpuplan results report: {ids}</title>",
        f"<style>{PAGE_STYLE}</style></head><body>\n<h1>gpuplan results report</h1>\n",
        f"<p>{len(report.runs)} bench serve runs: {html.escape(ids)}. Predicted curves: "
        "<code>gpuplan simulate</code> of the deployment, at the runs' loads.</p>\n",
        _notes_html(report.notes),
        *(_html_table(t) for t in tables(report)),
        *(f"<h2>{html.escape(title)}</h2>\n{div}\n" for title, div in charts),
        "</body></html>\n",
    ]
    return "".join(parts)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    _, title, headers, rows = table
    lines = [f"## {title}", "", "| " + " | ".join(map(_md_cell, headers)) + " |"]
    lines.append("|" + "---|" * len(headers))
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown_report(report: Report, images: Sequence[tuple[str, str]] = ()) -> str:
    """Tables (and notes) in Markdown; ``images``: (title, relative path) of PNG charts written beside it."""
    parts = ["# gpuplan results report", ""]
    if report.notes:
        parts += ["## Notes", "", *(f"- {n}" for n in report.notes), ""]
    parts += [_md_table(t) for t in tables(report)]
    parts += [f"## {title}\n\n![{title}]({path})\n" for title, path in images]
    return "\n".join(parts)


def _csv_row(v: RunView, key: str, stat: str | None, unit: str) -> dict[str, Any]:
    cfg = v.run.config
    predicted = None
    if v.predicted is not None:
        if key in LATENCIES and stat is not None:
            predicted = v.predicted.latency_ms[key][stat]
        elif key == "output_tokens_per_s":
            predicted = v.predicted.output_tokens_per_s
        elif key == "achieved_rate":
            predicted = v.predicted.requests_per_s
    return {
        "run_id": v.run.run_id,
        "curve": v.curve,
        "mode": v.mode,
        "target_rate_rps": cfg.get("rate_rps"),
        "concurrency": cfg.get("concurrency"),
        "achieved_rate_rps": v.measured("achieved_rate"),
        "metric": f"{key}.{stat}" if stat else key,
        "unit": unit,
        "measured": v.measured(key, stat),
        "predicted": predicted,
        "deployment": v.deployment.label if v.deployment else "",
    }


def csv_report(report: Report) -> str:
    """One row per run and metric: the measured value and, with a known deployment, the predicted one."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for view in report.runs:
        for key, stat, unit in CSV_METRICS:
            writer.writerow(_csv_row(view, key, stat, unit))
    return out.getvalue()

"""The ``gpuplan bench`` and ``gpuplan results`` command groups and what their commands share: the
``--store`` option, the run announcement on stderr and the summary table of one load-test run.

The commands are in ``cmd_bench_serve`` (``bench serve``), ``cmd_bench_gpu`` (``bench gpu``,
``bench train``, ``calibrate``) and ``cmd_results`` (``results ...``); ``mock-server`` is in ``cmd_mock``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from gpuplan.core.redact import redact
from gpuplan.interfaces.cli import render, server_rows
from gpuplan.interfaces.cli.app import app

__all__ = [
    "LATENCY_METRICS",
    "STATS",
    "StoreOpt",
    "announce",
    "bench_app",
    "goodput_line",
    "results_app",
    "run_tags",
    "summary_table",
]

bench_app = typer.Typer(no_args_is_help=True, help="Measure: serving load tests (and GPU micro-benchmarks).")
results_app = typer.Typer(
    no_args_is_help=True, help="Stored benchmark results: list, show, compare, export, report."
)
app.add_typer(bench_app, name="bench")
app.add_typer(results_app, name="results")
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="SQLAlchemy URL (default: $GPUPLAN_STORE or ~/.local/share/gpuplan/results.sqlite)"
    ),
]

LATENCY_METRICS = ("ttft_ms", "ttft_from_schedule_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_from_schedule_ms")
STATS = ("mean", "p50", "p90", "p99", "max")


def announce(run_id: str, store_url: str) -> None:
    """``run RUN_ID -> STORE`` on stderr, as a run starts (stdout stays the result); the store URL's
    password is masked (it would reach pod logs from a rendered bench Job)."""
    sys.stderr.write(f"run {run_id} -> {redact(store_url)}\n")
    sys.stderr.flush()


def goodput_line(s: dict[str, Any]) -> str:
    """The goodput of a run given goodput limits (``--slo-ttft-ms``/``--slo-tpot-ms``): the requests/s
    completed within them, beside the achieved rate (docs/bench.md)."""
    return (
        f"goodput {s['goodput_rps']:.2f} req/s within the SLO (--slo-ttft-ms/--slo-tpot-ms), "
        f"of {s['achieved_rate']:.2f} req/s achieved"
    )


def summary_table(s: dict[str, Any]) -> None:
    """One load-test run's summary, as stored (its JSON keys: docs/bench.md)."""
    load = {"rate": f"{s['target_rate']} req/s", "trace": "trace"}.get(
        s["mode"], f"concurrency {s['concurrency']}"
    )
    render.console.print(
        f"run {s['run_id']}: {load}, {s['requests_completed']} ok, {s['requests_failed']} failed, "
        f"achieved {s['achieved_rate']:.1f} req/s, {s['output_tokens_per_s']:.0f} output tokens/s",
        highlight=False,
    )
    if s.get("goodput_rps") is not None:
        render.console.print(goodput_line(s), highlight=False)
    if dep := s.get("deployment"):
        render.console.print(
            "behind the endpoint: " + ", ".join(f"{k} {v}" for k, v in dep.items() if k != "num_gpus"),
            highlight=False,
        )
    rows = [[m, *(s[m][k] for k in STATS)] for m in LATENCY_METRICS]
    lag = s["client"]
    rows += [
        ["client send lag ms", *(lag["send_lag_ms"][k] for k in STATS)],
        ["client loop lag ms", *(lag["loop_lag_ms"][k] for k in STATS)],
    ]
    render.table("latency", ["metric", *STATS], rows)
    _selected_table(s.get("selected_percentiles") or {})
    _server_tables(s)
    if s["errors"]:
        render.lines([f"{k}: {v}" for k, v in sorted(s["errors"].items())], title="errors")
    if s.get("finish_reasons"):  # a run stored before finish reasons were kept has none
        render.lines([f"{k}: {v}" for k, v in sorted(s["finish_reasons"].items())], title="finish_reason")
    for warning in s.get("warnings") or ():
        render.err_console.print(f"warning: {warning}", highlight=False)


def _server_tables(s: dict[str, Any]) -> None:
    """The server's view beside the client's, when ``/metrics`` was scraped (a failed scrape: its error)."""
    if (view := s.get("server_vs_client")) is not None:
        if rows := server_rows.latency_rows(view):
            render.table(
                "server vs client latency, ms (/metrics histograms)", server_rows.LATENCY_HEADERS, rows
            )
        if rows := server_rows.counter_rows(view):
            render.table("server vs client counts", server_rows.COUNTER_HEADERS, rows)
        if rows := server_rows.load_rows(view):
            render.table("server load", server_rows.LOAD_HEADERS, rows)
    scraped = s.get("server_metrics") or {}
    errors = (scraped.get("timeline") or {}).get("errors") or []
    if errors or "error" in scraped.get("after", {}):
        first = errors[0]["error"] if errors else scraped["after"]["error"]
        render.err_console.print(
            f"warning: /metrics scrape failed ({len(errors) or 1}x): {first}", highlight=False
        )


def _selected_table(selected: dict[str, dict[str, float | None]]) -> None:
    """``--percentile-metrics`` at ``--metric-percentiles``, when they ask for a percentile the latency
    table lacks (p95, p99.9 ...)."""
    keys = list(dict.fromkeys(k for points in selected.values() for k in points))
    if not any(k not in STATS for k in keys):
        return
    rows = [[metric, *(points.get(k) for k in keys)] for metric, points in selected.items()]
    render.table("percentiles (--percentile-metrics, --metric-percentiles)", ["metric", *keys], rows)


def run_tags(config: dict[str, Any]) -> str:
    """A run's ``--label`` and ``--metadata`` in one line ("" when it has neither)."""
    parts = [config["label"]] if config.get("label") else []
    parts += [f"{k}={v}" for k, v in (config.get("metadata") or {}).items()]
    return ", ".join(parts)

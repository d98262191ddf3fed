"""``gpuplan bench``, ``mock-server``, ``results``, ``calibrate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.cli import render
from gpuplan.cli.app import app, fmt, guarded
from gpuplan.errors import UserInputError

__all__ = ["app"]


@app.command("mock-server")
@guarded
def mock_server(
    host: Annotated[str, typer.Option(help="address to bind (keep 127.0.0.1 unless you mean it)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one (printed)")] = 8000,
    ttft_ms: Annotated[float, typer.Option(help="time to first token after admission")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="gap between tokens")] = 10.0,
    max_concurrency: Annotated[int, typer.Option(help="streams served at once; more queue")] = 1024,
    error_500_rate: Annotated[float, typer.Option(help="share of requests answered HTTP 500")] = 0.0,
    error_429_rate: Annotated[float, typer.Option(help="share answered HTTP 429")] = 0.0,
    drop_rate: Annotated[float, typer.Option(help="share whose connection drops mid-stream")] = 0.0,
    malformed_rate: Annotated[float, typer.Option(help="share with a malformed SSE event")] = 0.0,
    slow_rate: Annotated[float, typer.Option(help="share whose first byte is held back")] = 0.0,
    slow_first_byte_ms: Annotated[float, typer.Option(help="hold-back of the slow ones")] = 0.0,
    seed: Annotated[int, typer.Option(help="seed of the fault draw")] = 0,
) -> None:
    """Serve a mock OpenAI-compatible API (/v1/completions, /v1/chat/completions) with set latencies."""
    from gpuplan.bench.mock import MockConfig, run

    config = MockConfig(
        host=host, port=port, ttft_ms=ttft_ms, itl_ms=itl_ms, max_concurrency=max_concurrency,
        error_500_rate=error_500_rate, error_429_rate=error_429_rate, drop_rate=drop_rate,
        malformed_rate=malformed_rate, slow_rate=slow_rate, slow_first_byte_ms=slow_first_byte_ms, seed=seed,
    )

    def ready(bound: int) -> None:
        sys.stdout.write(f"mock server listening on http://{host}:{bound}\n")
        sys.stdout.flush()

    run(config, ready)


bench_app = typer.Typer(no_args_is_help=True, help="Measure: serving load tests (and GPU micro-benchmarks).")
results_app = typer.Typer(no_args_is_help=True, help="Stored benchmark results: list, show, export.")
app.add_typer(bench_app, name="bench")
app.add_typer(results_app, name="results")
StoreOpt = Annotated[str | None, typer.Option("--store", help="SQLAlchemy URL (default: $GPUPLAN_STORE or "
                                               "~/.local/share/gpuplan/results.sqlite)")]


@bench_app.command("serve")
@guarded
def bench_serve(
    url: Annotated[str | None, typer.Option(help="server base, http://host:port")] = None,
    model: Annotated[str | None, typer.Option(help="model name sent in each request")] = None,
    rate: Annotated[float | None, typer.Option(help="open loop: requests/s")] = None,
    concurrency: Annotated[int | None, typer.Option(help="closed loop: requests in flight")] = None,
    arrival: Annotated[str, typer.Option(help="poisson, constant or gamma")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape k (1 = Poisson)")] = 1.0,
    duration: Annotated[float, typer.Option(help="measured seconds (after warm-up)")] = 30.0,
    warmup: Annotated[float, typer.Option(help="seconds of load before measuring")] = 0.0,
    input_tokens: Annotated[int, typer.Option(help="prompt tokens (approximate, docs/bench.md)")] = 256,
    output_tokens: Annotated[int, typer.Option(help="max_tokens of each request")] = 128,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    slo_ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit for goodput")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit for goodput")] = None,
    timeout: Annotated[float, typer.Option(help="per-request timeout, s")] = 60.0,
    seed: Annotated[int, typer.Option()] = 0,
    resume: Annotated[str | None, typer.Option(help="RUN_ID of an interrupted run to complete")] = None,
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Load-test an OpenAI-compatible endpoint; every request is stored as it completes."""
    from gpuplan.bench.load import LoadConfig
    from gpuplan.bench.load.service import serve

    shape = fmt(format)
    config = None
    if resume is None:
        config = LoadConfig.model_validate({
            "url": url, "model": model, "api": api, "rate_rps": rate, "concurrency": concurrency,
            "arrival": arrival, "burstiness": burstiness, "duration_s": duration, "warmup_s": warmup,
            "input_tokens": input_tokens, "output_tokens": output_tokens, "seed": seed,
            "request_timeout_s": timeout, "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms})
    summary = serve(config, store, resume, announce=_announce)
    if shape == "json":
        render.emit_json(summary)
        return
    _summary_table(summary.model_dump(mode="json"))


def _announce(run_id: str, store_url: str) -> None:
    sys.stderr.write(f"run {run_id} -> {store_url}\n")
    sys.stderr.flush()


def _summary_table(s: dict[str, Any]) -> None:
    load = f"{s['target_rate']} req/s" if s["mode"] == "rate" else f"concurrency {s['concurrency']}"
    render.console.print(f"run {s['run_id']}: {load}, {s['requests_completed']} ok, {s['requests_failed']} failed, "
                         f"achieved {s['achieved_rate']:.1f} req/s, {s['output_tokens_per_s']:.0f} output tokens/s",
                         highlight=False)
    metrics = ["ttft_ms", "ttft_from_schedule_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_from_schedule_ms"]
    rows = [[m, *(s[m][k] for k in ("mean", "p50", "p90", "p99", "max"))] for m in metrics]
    lag = s["client"]
    rows += [["client send lag ms", *(lag["send_lag_ms"][k] for k in ("mean", "p50", "p90", "p99", "max"))],
             ["client loop lag ms", *(lag["loop_lag_ms"][k] for k in ("mean", "p50", "p90", "p99", "max"))]]
    render.table("latency", ["metric", "mean", "p50", "p90", "p99", "max"], rows)
    if s["errors"]:
        render.lines([f"{k}: {v}" for k, v in sorted(s["errors"].items())], title="errors")


@results_app.command("list")
@guarded
def results_list(store: StoreOpt = None,
                 format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table") -> None:
    """Stored runs, oldest first."""
    from gpuplan.results import Store

    runs = Store(store).runs()
    if fmt(format) == "json":
        render.emit_json([r.model_dump(mode="json") for r in runs])
        return
    rows = [[r.run_id[:12], r.kind, r.status, r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.requests,
             r.config.get("model"), r.config.get("rate_rps") or f"c={r.config.get('concurrency')}",
             (r.summary or {}).get("achieved_rate")] for r in runs]
    render.table("runs", ["id", "kind", "status", "created", "requests", "model", "load", "achieved"], rows)


@results_app.command("show")
@guarded
def results_show(run_id: Annotated[str, typer.Argument(help="run id or a unique prefix")], store: StoreOpt = None,
                 format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table") -> None:
    """One run: config, conditions and summary."""
    from gpuplan.results import Store

    info = Store(store).run(run_id)
    if fmt(format) == "json" or info.summary is None:
        render.emit_json(info)
        return
    _summary_table(info.summary)


@results_app.command("export")
@guarded
def results_export(run_id: Annotated[str, typer.Argument(help="run id or a unique prefix")], store: StoreOpt = None,
                   format: Annotated[str, typer.Option("--format", "-f", help="csv or json")] = "csv",
                   output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default stdout)")] = None,
                   ) -> None:
    """Every request row of a run, as CSV or JSON."""
    from gpuplan.results import Store
    from gpuplan.results.export import to_csv, to_json

    if format not in ("csv", "json"):
        raise UserInputError(f"--format {format!r} is not one of csv, json")
    db = Store(store)
    records = db.records(db.run(run_id).run_id)
    text = to_csv(records) if format == "csv" else to_json(records)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")

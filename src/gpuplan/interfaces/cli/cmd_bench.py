"""``gpuplan bench``, ``mock-server``, ``results``, ``calibrate``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.cli import render
from gpuplan.interfaces.cli.app import app, check_listen_address, fmt, guarded

__all__ = ["app"]


@app.command("mock-server")
@guarded
def mock_server(
    host: Annotated[
        str, typer.Option(help="address to bind (keep 127.0.0.1 unless you mean it)")
    ] = "127.0.0.1",
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
    from gpuplan.adapters.bench.mock.config import MockConfig
    from gpuplan.adapters.bench.mock.server import run

    if 0 <= port < 65536:  # out-of-range ports are the config's own error below
        check_listen_address(host, port)
    config = MockConfig(
        host=host,
        port=port,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        max_concurrency=max_concurrency,
        error_500_rate=error_500_rate,
        error_429_rate=error_429_rate,
        drop_rate=drop_rate,
        malformed_rate=malformed_rate,
        slow_rate=slow_rate,
        slow_first_byte_ms=slow_first_byte_ms,
        seed=seed,
    )

    def ready(bound: int) -> None:
        sys.stdout.write(f"mock server listening on http://{host}:{bound}\n")
        sys.stdout.flush()

    run(config, ready)


bench_app = typer.Typer(no_args_is_help=True, help="Measure: serving load tests (and GPU micro-benchmarks).")
results_app = typer.Typer(no_args_is_help=True, help="Stored benchmark results: list, show, compare, export.")
app.add_typer(bench_app, name="bench")
app.add_typer(results_app, name="results")
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="SQLAlchemy URL (default: $GPUPLAN_STORE or ~/.local/share/gpuplan/results.sqlite)"
    ),
]


@bench_app.command("serve")
@guarded
def bench_serve(
    url: Annotated[str | None, typer.Option(help="server base, http://host:port")] = None,
    model: Annotated[str | None, typer.Option(help="model name sent in each request")] = None,
    rate: Annotated[
        float | None, typer.Option(help="open loop: requests/s (start rate of --max-rate-under-slo)")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="closed loop: requests in flight")] = None,
    trace: Annotated[
        Path | None, typer.Option(help="replay a trace (CSV/JSONL: arrival_s, input_tokens, output_tokens)")
    ] = None,
    rates: Annotated[str | None, typer.Option(help="sweep: one run per rate, e.g. 10,20,40")] = None,
    max_rate_under_slo: Annotated[
        bool,
        typer.Option(
            "--max-rate-under-slo", help="search the highest rate meeting --slo-ttft-p99-ms/--slo-tpot-p99-ms"
        ),
    ] = False,
    slo_ttft_p99_ms: Annotated[float | None, typer.Option(help="P99 TTFT limit of the search")] = None,
    slo_tpot_p99_ms: Annotated[float | None, typer.Option(help="P99 TPOT limit of the search")] = None,
    search_steps: Annotated[int, typer.Option(help="most runs the search makes")] = 8,
    arrival: Annotated[str, typer.Option(help="poisson, constant or gamma")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape k (1 = Poisson)")] = 1.0,
    duration: Annotated[
        float | None, typer.Option(help="measured seconds after warm-up (default 30; a trace: its span)")
    ] = None,
    warmup: Annotated[float, typer.Option(help="seconds of load before measuring")] = 0.0,
    input_tokens: Annotated[int, typer.Option(help="prompt tokens (approximate, docs/bench.md)")] = 256,
    output_tokens: Annotated[int, typer.Option(help="max_tokens of each request")] = 128,
    prompts: Annotated[
        Path | None, typer.Option(help='JSONL prompts ({"prompt": ...} per line), in turn')
    ] = None,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    slo_ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit for goodput")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit for goodput")] = None,
    timeout: Annotated[float, typer.Option(help="per-request timeout, s")] = 60.0,
    workers: Annotated[int, typer.Option(help="client processes sharing the schedule")] = 1,
    scrape_metrics: Annotated[
        bool, typer.Option("--scrape-metrics", help="scrape URL/metrics before/after")
    ] = False,
    metrics_url: Annotated[
        str | None, typer.Option(help="Prometheus endpoint to scrape (implies scraping)")
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    resume: Annotated[str | None, typer.Option(help="RUN_ID of an interrupted run to complete")] = None,
    store: StoreOpt = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress", help="progress bar on stderr (default: when stderr is a terminal)"
        ),
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Load-test an OpenAI-compatible endpoint; every request is stored as it completes."""
    shape = fmt(format)
    raw = {
        "url": url,
        "model": model,
        "api": api,
        "rate_rps": rate,
        "concurrency": concurrency,
        "trace_path": str(trace) if trace else None,
        "prompts_path": str(prompts) if prompts else None,
        "arrival": arrival,
        "burstiness": burstiness,
        "duration_s": duration,
        "warmup_s": warmup,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "seed": seed,
        "request_timeout_s": timeout,
        "slo_ttft_ms": slo_ttft_ms,
        "slo_tpot_ms": slo_tpot_ms,
        "workers": workers,
        "metrics_url": metrics_url or (url.rstrip("/") + "/metrics" if scrape_metrics and url else None),
    }
    sweep_rates = _rates(rates)
    if (sweep_rates or max_rate_under_slo) and resume is None:
        raw["rate_rps"] = raw["rate_rps"] or (sweep_rates[0] if sweep_rates else None)
    config = None if resume is not None else _load_config(raw)
    show = progress if progress is not None else sys.stderr.isatty()
    with _progress(show) as hooks:
        if max_rate_under_slo:
            _slo_search(config, store, hooks, shape, (slo_ttft_p99_ms, slo_tpot_p99_ms), search_steps)
        elif sweep_rates:
            _sweep(config, store, hooks, shape, sweep_rates)
        else:
            _single(config, store, resume, hooks, shape)


def _rates(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"--rates {text!r} must be numbers separated by commas, e.g. 10,20,40") from None
    if not values or min(values) <= 0:
        raise UserInputError(f"--rates {text!r}: every rate must be > 0")
    return values


def _load_config(raw: dict[str, Any]) -> Any:
    from gpuplan.adapters.bench.load.config import LoadConfig
    from gpuplan.adapters.bench.load.workload import trace_span_s

    if raw["duration_s"] is None:
        raw["duration_s"] = trace_span_s(raw["trace_path"]) if raw["trace_path"] else 30.0
    return LoadConfig.model_validate(raw)


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """Service hooks; with ``enabled``, a rich progress bar of completed requests on stderr."""
    from gpuplan.usecases.bench_serve import Hooks

    if not enabled:
        yield Hooks(announce=_announce)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.err_console,
        transient=True,
    )
    tasks: list[Any] = []

    def start(total: int | None) -> None:
        tasks.append(bar.add_task("requests", total=total))

    def record(_record: Any) -> None:
        bar.advance(tasks[-1])

    with bar:
        yield Hooks(announce=_announce, start=start, record=record)


def _single(config: Any, store: str | None, resume: str | None, hooks: Any, shape: str) -> None:
    from gpuplan.usecases.bench_serve import serve

    summary = serve(config, store, resume, hooks=hooks)
    if shape == "json":
        render.emit_json(summary)
        return
    _summary_table(summary.model_dump(mode="json"))


def _runner(store: str | None, hooks: Any) -> Any:
    from gpuplan.usecases.bench_serve import serve

    return lambda cfg: serve(cfg, store, hooks=hooks)


def _sweep(config: Any, store: str | None, hooks: Any, shape: str, rates: list[float]) -> None:
    from gpuplan.adapters.bench.load.search import sweep

    if config is None:
        raise UserInputError("--rates cannot be combined with --resume")
    summaries = sweep(config, rates, _runner(store, hooks))
    if shape == "json":
        render.emit_json([s.model_dump(mode="json") for s in summaries])
        return
    render.table(
        "sweep",
        [
            "target req/s",
            "achieved",
            "ok",
            "failed",
            "TTFT p50",
            "TTFT p99 (sched)",
            "TPOT p99",
            "ITL mean",
            "out tok/s",
            "run",
        ],
        [
            [
                s.target_rate,
                s.achieved_rate,
                s.requests_completed,
                s.requests_failed,
                s.ttft_ms.p50,
                s.ttft_from_schedule_ms.p99,
                s.tpot_ms.p99,
                s.itl_ms.mean,
                s.output_tokens_per_s,
                s.run_id[:12],
            ]
            for s in summaries
        ],
    )


def _slo_search(
    config: Any, store: str | None, hooks: Any, shape: str, slo: tuple[float | None, float | None], steps: int
) -> None:
    from gpuplan.adapters.bench.load.search import max_rate_under_slo

    if config is None or config.rate_rps is None:
        raise UserInputError("--max-rate-under-slo needs --rate (the first rate tried), not --resume")
    if slo == (None, None):
        raise UserInputError("--max-rate-under-slo needs --slo-ttft-p99-ms and/or --slo-tpot-p99-ms")
    if steps < 1:
        raise UserInputError(f"--search-steps must be >= 1, got {steps}", hint="e.g. --search-steps 8")
    result = max_rate_under_slo(
        config,
        _runner(store, hooks),
        start_rps=config.rate_rps,
        ttft_p99_ms=slo[0],
        tpot_p99_ms=slo[1],
        max_steps=steps,
    )
    if shape == "json":
        render.emit_json(result)
        return
    render.table(
        "max rate under SLO",
        ["rate req/s", "passed", "achieved", "TTFT p99 (sched)", "TPOT p99", "failed share", "run"],
        [
            [
                st.rate_rps,
                "yes" if st.passed else "no",
                st.achieved_rate,
                st.ttft_p99_ms,
                st.tpot_p99_ms,
                st.failed_share,
                st.run_id[:12],
            ]
            for st in result.steps
        ],
    )
    render.console.print(f"max rate under SLO: {result.max_rate_under_slo} req/s", highlight=False)


def _announce(run_id: str, store_url: str) -> None:
    sys.stderr.write(f"run {run_id} -> {store_url}\n")
    sys.stderr.flush()


def _summary_table(s: dict[str, Any]) -> None:
    load = {"rate": f"{s['target_rate']} req/s", "trace": "trace"}.get(
        s["mode"], f"concurrency {s['concurrency']}"
    )
    render.console.print(
        f"run {s['run_id']}: {load}, {s['requests_completed']} ok, {s['requests_failed']} failed, "
        f"achieved {s['achieved_rate']:.1f} req/s, {s['output_tokens_per_s']:.0f} output tokens/s",
        highlight=False,
    )
    metrics = ["ttft_ms", "ttft_from_schedule_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_from_schedule_ms"]
    rows = [[m, *(s[m][k] for k in ("mean", "p50", "p90", "p99", "max"))] for m in metrics]
    lag = s["client"]
    rows += [
        ["client send lag ms", *(lag["send_lag_ms"][k] for k in ("mean", "p50", "p90", "p99", "max"))],
        ["client loop lag ms", *(lag["loop_lag_ms"][k] for k in ("mean", "p50", "p90", "p99", "max"))],
    ]
    render.table("latency", ["metric", "mean", "p50", "p90", "p99", "max"], rows)
    if s["errors"]:
        render.lines([f"{k}: {v}" for k, v in sorted(s["errors"].items())], title="errors")


@results_app.command("list")
@guarded
def results_list(
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Stored runs, oldest first."""
    from gpuplan.adapters.store.database import Store

    runs = Store(store).runs()
    if fmt(format) == "json":
        render.emit_json([r.model_dump(mode="json") for r in runs])
        return
    rows = [
        [
            r.run_id[:12],
            r.kind,
            r.status,
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.requests,
            r.config.get("model"),
            _load_label(r.config),
            (r.summary or {}).get("achieved_rate"),
        ]
        for r in runs
    ]
    render.table("runs", ["id", "kind", "status", "created", "requests", "model", "load", "achieved"], rows)


def _load_label(config: dict[str, Any]) -> object:
    if config.get("rate_rps"):
        return config["rate_rps"]
    return f"c={config['concurrency']}" if config.get("concurrency") else "trace"


@results_app.command("show")
@guarded
def results_show(
    run_id: Annotated[str, typer.Argument(help="run id or a unique prefix")],
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """One run: config, conditions and summary."""
    from gpuplan.adapters.store.database import Store

    info = Store(store).run(run_id)
    if fmt(format) == "json" or info.summary is None:
        render.emit_json(info)
        return
    _summary_table(info.summary)


@results_app.command("export")
@guarded
def results_export(
    run_id: Annotated[str, typer.Argument(help="run id or a unique prefix")],
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="csv or json")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default stdout)")] = None,
) -> None:
    """Every request row of a run, as CSV or JSON."""
    from gpuplan.adapters.store.database import Store
    from gpuplan.adapters.store.export import to_csv, to_json

    if format not in ("csv", "json"):
        raise UserInputError(f"--format {format!r} is not one of csv, json")
    db = Store(store)
    records = db.records(db.run(run_id).run_id)
    text = to_csv(records) if format == "csv" else to_json(records)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


@results_app.command("compare")
@guarded
def results_compare(
    run_a: Annotated[str, typer.Argument(help="run id or a unique prefix (A)")],
    run_b: Annotated[str, typer.Argument(help="run id or a unique prefix (B)")],
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Two runs side by side: key metrics, B − A in %, and the settings that differ."""
    from gpuplan.adapters.store.compare import compare
    from gpuplan.adapters.store.database import Store

    db = Store(store)
    result = compare(db.run(run_a), db.run(run_b))
    if fmt(format) == "json":
        render.emit_json(result)
        return
    render.table(
        f"A {result['a'][:12]} vs B {result['b'][:12]}",
        ["metric", "A", "B", "B - A", "change %"],
        [[m["metric"], m["a"], m["b"], m["delta"], m["delta_pct"]] for m in result["metrics"]],
    )
    if result["config_diff"]:
        render.lines(
            [f"{k}: {a} -> {b}" for k, (a, b) in result["config_diff"].items()], title="settings that differ"
        )

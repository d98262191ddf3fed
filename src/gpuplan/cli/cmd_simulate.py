"""``gpuplan simulate SCENARIO.yaml``: the serving simulator on one deployment (docs/simulator.md).

Parse the scenario (and its trace file) → one validated ``SimulateScenario`` → build the replica
model → simulate (and optionally bisect the capacity under the SLO) → render a table or JSON, and
optionally a plotly timeline (``--plot``) and the per-request CSV (``--trace-out``).
"""

from __future__ import annotations

import csv
import importlib
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from gpuplan.cli.app import CatalogOpt, FormatOpt, app, catalog_from, fmt, guarded
from gpuplan.cli.render import console, emit_json, lines, table
from gpuplan.errors import FileFormatError, UserInputError
from gpuplan.models import get_model
from gpuplan.perf.inference import ReplicaModel
from gpuplan.perf.layout import Layout, check_layout
from gpuplan.sim.capacity import CapacityResult, max_rate_under_slo
from gpuplan.sim.metrics import SimSummary, per_request_s, summarise
from gpuplan.sim.scenario import SimulateScenario, parse_simulate_scenario
from gpuplan.sim.simulator import SimResult, simulate
from gpuplan.sim.workload import LengthDist, Requests, WorkloadSpec, generate, parse_trace

__all__ = ["app"]


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read {what} {path}: {exc}", hint="check the path") from None


def _trace(sc: SimulateScenario, base: Path) -> Requests | None:
    wl = sc.workload
    if wl.trace is None:
        if wl.arrival.kind == "trace" or wl.lengths_from_trace:
            raise UserInputError("workload.trace is required for trace arrivals or lengths_from_trace")
        return None
    path = Path(wl.trace) if Path(wl.trace).is_absolute() else base / wl.trace
    kind = wl.trace_format or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv")
    return parse_trace(_read(path, "trace"), origin=str(path), fmt=kind)


def _spec(sc: SimulateScenario, trace: Requests | None) -> WorkloadSpec:
    wl = sc.workload
    spec = WorkloadSpec(
        arrival=wl.arrival,
        input_tokens=wl.input_tokens,
        output_tokens=wl.output_tokens,
        num_requests=wl.num_requests,
        seed=wl.seed,
    )
    if wl.lengths_from_trace and trace is not None:
        spec = spec.model_copy(
            update={
                "input_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in np.maximum(trace.input_tokens, 1))
                ),
                "output_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in trace.output_tokens)
                ),
            }
        )
    return spec


def _replica(sc: SimulateScenario, catalog_files: list[Path] | None, requests: Requests) -> ReplicaModel:
    if not sc.hardware.gpu:
        raise UserInputError("hardware.gpu is required", hint="e.g. hardware: {gpu: H100-SXM, count: 1}")
    model, gpu = get_model(sc.model), catalog_from(catalog_files).get_gpu(sc.hardware.gpu)
    count, pp = sc.hardware.count, sc.parallelism.pp
    tp = sc.parallelism.tp or count // pp
    if tp < 1 or count % (tp * pp):
        raise UserInputError(f"hardware.count={count} is not a multiple of tp x pp = {tp}x{pp}")
    layout = Layout(
        tp=tp,
        pp=pp,
        ep=sc.parallelism.ep,
        replicas=count // (tp * pp),
        weight_dtype=sc.precision.weights,
        kv_dtype=sc.precision.kv_cache,
        engine=sc.engine,
        gpu_memory_utilization=sc.gpu_memory_utilization,
    )
    check_layout(model, gpu, layout)
    longest = int((requests.input_tokens + requests.output_tokens).max())
    return ReplicaModel.build(model, gpu, layout, context_tokens=sc.max_model_len or longest)


@app.command("simulate")
@guarded
def simulate_cmd(
    scenario: Annotated[Path, typer.Argument(help="simulate scenario YAML (docs/simulator.md)")],
    plot: Annotated[Path | None, typer.Option(help="write a plotly HTML timeline here")] = None,
    trace_out: Annotated[Path | None, typer.Option(help="write per-request times (CSV) here")] = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Simulate continuous batching on one deployment: P50-P99 latencies, throughput, goodput, KV use."""
    out_format = fmt(format)
    if plot is not None:
        _plotly()
    sc = parse_simulate_scenario(_read(scenario, "scenario"), origin=str(scenario))
    trace = _trace(sc, scenario.parent)
    spec = _spec(sc, trace)
    requests = generate(spec, trace)
    replica = _replica(sc, catalog, requests)
    result = simulate(replica, requests, sc.simulation)
    summary = summarise(result, slo=sc.slo, warmup_fraction=sc.simulation.warmup_fraction)
    capacity = None
    if sc.capacity_search:
        if sc.slo.empty:
            raise UserInputError(
                "capacity_search needs an slo", hint="e.g. slo: {ttft_p99_ms: 1000, tpot_p99_ms: 50}"
            )
        config = sc.simulation.model_copy(update={"record_timeline": False})
        capacity = max_rate_under_slo(
            replica, spec.model_copy(update={"num_requests": min(spec.num_requests, 4000)}), sc.slo, config
        )
    if trace_out is not None:
        _write_requests(trace_out, result)
    if plot is not None:
        _write_plot(plot, result)
    _render(summary, capacity, out_format)


def _render(summary: SimSummary, capacity: CapacityResult | None, f: str) -> None:
    if f == "json":
        emit_json(
            {
                "summary": summary.model_dump(mode="json"),
                "capacity": None if capacity is None else capacity.model_dump(mode="json"),
            }
        )
        return
    rows = []
    for name in ("ttft", "tpot", "itl", "e2e", "queueing"):
        d = getattr(summary, name)
        rows.append((name.upper(), d.mean_ms, d.p50_ms, d.p90_ms, d.p95_ms, d.p99_ms))
    table("latency (ms)", ["metric", "mean", "p50", "p90", "p95", "p99"], rows)
    notes = [
        f"{summary.completed:,} of {summary.requests:,} requests completed ({summary.measured:,} measured), "
        f"{summary.rejected} rejected, {summary.preemptions} preemptions",
        f"throughput {summary.requests_per_s:.2f} req/s, {summary.output_tokens_per_s:,.0f} output tokens/s, "
        f"{summary.total_tokens_per_s:,.0f} total tokens/s; mean batch {summary.mean_batch:.1f}",
        f"KV cache use mean {summary.kv_utilization_mean:.0%}, max {summary.kv_utilization_max:.0%}",
    ]
    if summary.goodput_requests_per_s is not None:
        notes.append(
            f"goodput {summary.goodput_requests_per_s:.2f} req/s ({summary.slo_attainment or 0:.1%} within SLO)"
        )
    if summary.truncated:
        notes.append(f"TRUNCATED: {summary.truncated}")
    if capacity is not None:
        notes.append(
            f"capacity under the SLO: {capacity.rate_rps:.2f} req/s"
            if capacity.feasible
            else f"capacity: {capacity.reason}"
        )
    lines(notes, title=f"{summary.events:,} events, {summary.sim_time_s:,.1f} s simulated")
    console.print()


def _write_requests(path: Path, result: SimResult) -> None:
    lat = per_request_s(result)
    try:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                [
                    "request",
                    "arrival_s",
                    "input_tokens",
                    "output_tokens",
                    "ttft_s",
                    "tpot_s",
                    "e2e_s",
                    "queueing_s",
                    "preemptions",
                ]
            )
            for i in range(result.arrival_s.size):
                writer.writerow(
                    [
                        i,
                        _num(result.arrival_s[i]),
                        int(result.input_tokens[i]),
                        int(result.output_tokens[i]),
                        _num(lat["ttft"][i]),
                        _num(lat["tpot"][i]),
                        _num(lat["e2e"][i]),
                        _num(lat["queueing"][i]),
                        int(result.preemptions[i]),
                    ]
                )
    except OSError as exc:
        raise UserInputError(f"cannot write {path}: {exc.strerror}") from None


def _num(value: float) -> str:
    return f"{value:.6f}" if math.isfinite(value) else ""


def _plotly() -> Any:
    try:  # optional dependency (extra 'plot'), imported by name so that type checking does not need it
        go = importlib.import_module("plotly.graph_objects")
        make_subplots = importlib.import_module("plotly.subplots").make_subplots
    except ImportError:
        raise UserInputError(
            "--plot needs plotly, which is not installed", hint="pip install 'gpuplan[plot]'"
        ) from None
    return go, make_subplots


def _write_plot(path: Path, result: SimResult) -> None:
    go, make_subplots = _plotly()
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        subplot_titles=("decoding sequences per step", "KV cache use", "request E2E (s) by arrival"),
    )
    for index, tl in enumerate(result.timelines):
        fig.add_trace(
            go.Scattergl(x=tl.t_s, y=tl.decode, mode="lines", name=f"replica {index} batch"), row=1, col=1
        )
        fig.add_trace(
            go.Scattergl(x=tl.t_s, y=tl.kv_fraction, mode="lines", name=f"replica {index} KV"), row=2, col=1
        )
    e2e = per_request_s(result)["e2e"]
    fig.add_trace(
        go.Scattergl(x=result.arrival_s, y=e2e, mode="markers", name="E2E", marker={"size": 3}), row=3, col=1
    )
    fig.update_xaxes(title_text="simulated time (s)", row=3, col=1)
    try:
        fig.write_html(str(path), include_plotlyjs="cdn")
    except OSError as exc:
        raise UserInputError(f"cannot write {path}: {exc.strerror}") from None

"""``gpuplan simulate SCENARIO.yaml``: the serving simulator on one deployment (docs/simulator.md).

Parse the scenario (and its trace file) → one validated ``SimulateScenario`` → build the replica
model → simulate (and optionally bisect the capacity under the SLO) → render a table or JSON, and
optionally a plotly timeline (``--plot``) and the per-request CSV (``--trace-out``).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.adapters.scenario_files.deployment import scenario_notes
from gpuplan.adapters.scenario_files.simulate import parse_simulate_scenario
from gpuplan.core.calibration.uncertainty import DEFAULT_LEVEL, Bounds
from gpuplan.core.errors import UserInputError
from gpuplan.core.sim.metrics import SimSummary, per_request_s
from gpuplan.core.sim.simulator import SimResult
from gpuplan.interfaces.cli import feature_flags as ff
from gpuplan.interfaces.cli.app import (
    CalibrationOpt,
    CatalogOpt,
    FormatOpt,
    IntervalOpt,
    app,
    catalog_from,
    fmt,
    guarded,
    uncertainty_from,
)
from gpuplan.interfaces.cli.render import (
    console,
    emit_json,
    group_read,
    lines,
    note,
    progress_bar,
    ranged,
    table,
)
from gpuplan.interfaces.plots import serving as plots
from gpuplan.usecases.calibration.profile import load_calibration
from gpuplan.usecases.resolve import DeploymentFeatures, with_features
from gpuplan.usecases.simulate import LimitCheck, SimulationOutcome, read_text, simulate_scenario
from gpuplan.usecases.simulate_intervals import figure_value


@app.command("simulate")
@guarded
def simulate_cmd(
    scenario: Annotated[
        Path, typer.Argument(help="scenario YAML, the one predict reads (docs/simulator.md)")
    ],
    plot: Annotated[Path | None, typer.Option(help="write the timeline chart: FILE.html or FILE.png")] = None,
    trace_out: Annotated[Path | None, typer.Option(help="write per-request times (CSV) here")] = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
    spec_method: ff.SpecMethodOpt = None,
    spec_tokens: ff.SpecTokensOpt = None,
    spec_acceptance: ff.SpecAcceptanceOpt = None,
    draft_model: ff.DraftModelOpt = None,
    prefix_hit_rate: ff.PrefixHitRateOpt = None,
    engine_version: ff.EngineVersionOpt = None,
    interval: IntervalOpt = DEFAULT_LEVEL,
) -> None:
    """Simulate continuous batching on one deployment: P50-P99 latencies, throughput, goodput, KV use."""
    out_format = fmt(format)
    text = read_text(scenario, "scenario")
    features = DeploymentFeatures.of(locals())
    sc = with_features(parse_simulate_scenario(text, origin=str(scenario)), features)
    cal, sure = load_calibration(calibration) if calibration else None, uncertainty_from(interval)
    with progress_bar("simulating") as progress:
        outcome = simulate_scenario(
            sc, catalog_from(catalog), base_dir=scenario.parent, cal=cal, progress=progress, uncertainty=sure
        )
    if trace_out is not None:
        _write_requests(trace_out, outcome.result)
    if plot is not None:
        plots.write_simulation_plot(plot, outcome.result)
    _render(outcome, out_format)
    for line in scenario_notes(text):  # after the result: an error stays the one stderr line
        note(f"{scenario}: {line}")


def _render(outcome: SimulationOutcome, f: str) -> None:
    summary, capacity, sla, interval = outcome.summary, outcome.capacity, outcome.sla, outcome.interval
    if f == "json":
        emit_json(
            {
                "summary": summary.model_dump(mode="json"),
                "capacity": None if capacity is None else capacity.model_dump(mode="json"),
                "sla": [check.model_dump(mode="json") for check in sla],
                "interval": None if interval is None else interval.model_dump(mode="json"),
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
        f"{summary.total_tokens_per_s:,.0f} total tokens/s"
        + (f"; mean batch {summary.mean_batch:.1f}" if summary.mean_batch is not None else ""),
    ]
    if summary.kv_utilization_mean is not None and summary.kv_utilization_max is not None:
        notes.append(
            f"KV cache use mean {summary.kv_utilization_mean:.0%}, max {summary.kv_utilization_max:.0%}"
        )
    if summary.goodput_requests_per_s is not None:
        notes.append(
            f"goodput {summary.goodput_requests_per_s:.2f} req/s "
            f"({summary.slo_attainment or 0:.1%} within the P99 limits, per request)"
        )
    notes += [_limit_line(check) for check in sla]
    if summary.truncated:
        notes.append(f"TRUNCATED: {summary.truncated}")
    if capacity is not None:
        notes.append(
            f"capacity under the P99 limits: {capacity.rate_rps:.2f} req/s"
            if capacity.feasible
            else f"capacity: {capacity.reason}"
        )
    lines(notes, title=f"{summary.events:,} events, {summary.sim_time_s:,.1f} s simulated")
    if interval is not None:
        lines(_interval_lines(summary, interval), title="Intervals")
    console.print()


SIM_LABELS = {
    "output_tokens_per_s": "output tokens/s",
    "ttft_p50_ms": "TTFT P50 ms",
    "ttft_p99_ms": "TTFT P99 ms",
    "tpot_p50_ms": "TPOT P50 ms",
    "tpot_p99_ms": "TPOT P99 ms",
}


def _interval_lines(summary: SimSummary, b: Bounds) -> list[str]:
    """``TTFT P99 ms 812 (700-1.9k): group (rows, GPUs)`` per figure, after a line saying what they are."""
    out = [
        f"(low-high): the {b.level:.0%} interval from the error model of held-out residuals (docs/validate.md, "
        "Intervals); a P99 at an open-loop rate also carries the capacity interval through the queue"
    ]
    for name, where in b.sources.items():
        shown = ranged(figure_value(summary, name), b.low.get(name), b.high.get(name))
        out.append(f"{SIM_LABELS.get(name, name)} {shown}: {group_read(where)}")
    return out


def _limit_line(check: LimitCheck) -> str:
    """``sla.ttft_p99_ms 1,000 ms: 812 ms, met`` (the simulated statistic against its limit)."""
    measured = "not reached" if check.measured_ms is None else f"{check.measured_ms:,.1f} ms"
    return f"sla.{check.limit} {check.limit_ms:,.0f} ms: {measured}, {'met' if check.met else 'NOT met'}"


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

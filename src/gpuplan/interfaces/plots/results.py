"""Charts of ``gpuplan results report``: latency and throughput against load (measured runs, and the
simulated deployment dotted over them) and the CDFs of TTFT and TPOT per run.

Draws a :class:`gpuplan.usecases.results_report.model.Report` the use case computed; it measures and
predicts nothing (tests/unit/interfaces/plots/test_plots_draw_only.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.plots.serving import PNG_HINT, plotly_modules

if TYPE_CHECKING:  # the answer drawn; names for the annotations only
    from gpuplan.usecases.results_report.model import Curve, Report, RunView

LATENCY_TITLES = {"ttft_ms": "TTFT, ms", "tpot_ms": "TPOT, ms", "itl_ms": "ITL, ms", "e2e_ms": "E2E, ms"}
LOAD_TITLES = {"rate": "achieved rate, req/s", "concurrency": "concurrency (clients in flight)"}
MEASURED_DASH = {"p50": "solid", "p99": "dash"}
PREDICTED_DASH = {"p50": "dot", "p99": "dashdot"}
PNG_WIDTH_PX = 1200
"""PNG charts are this wide (kaleido's default, 700 px, squeezes the 2 x 2 latency panels)."""
PNG_HEIGHT_PX = 500
"""The height of a PNG chart whose figure sets none."""


@dataclass(frozen=True)
class Chart:
    """One figure of the report: its element id in the page, its title, the plotly figure."""

    id: str
    title: str
    figure: Any


def _colours(labels: Sequence[str]) -> dict[str, str]:
    palette = importlib.import_module("plotly.colors").qualitative.Plotly
    return {label: palette[i % len(palette)] for i, label in enumerate(dict.fromkeys(labels))}


def _latency_traces(curve: Curve, key: str, colour: str, legend: bool) -> list[Any]:
    go, _ = plotly_modules()
    traces = []
    for stat in ("p50", "p99"):
        traces.append(
            go.Scatter(
                x=[v.load for v in curve.runs],
                y=[v.measured(key, stat) for v in curve.runs],
                text=[v.run.run_id[:12] for v in curve.runs],
                mode="lines+markers",
                name=f"measured {stat}: {curve.label}",
                line={"color": colour, "dash": MEASURED_DASH[stat]},
                legendgroup=f"{curve.label} measured {stat}",
                showlegend=legend,
                hovertemplate="run %{text}<br>%{x:.3g}: %{y:.4g} ms<extra></extra>",
            )
        )
        if curve.predicted:
            traces.append(
                go.Scatter(
                    x=[p.load for p in curve.predicted],
                    y=[p.latency_ms[key][stat] for p in curve.predicted],
                    mode="lines",
                    name=f"predicted {stat}: {curve.deployment.label if curve.deployment else ''}",
                    line={"color": colour, "dash": PREDICTED_DASH[stat], "width": 1.5},
                    opacity=0.7,
                    legendgroup=f"{curve.label} predicted {stat}",
                    showlegend=legend,
                    hovertemplate="simulated %{x:.3g}: %{y:.4g} ms<extra></extra>",
                )
            )
    return traces


def latency_figure(report: Report, mode: str) -> Any:
    """TTFT, TPOT, ITL and E2E (P50 solid, P99 dashed) against load, one colour per curve; the
    simulated deployment's P50/P99 dotted in the same colour."""
    go, make_subplots = plotly_modules()
    curves = [c for c in report.curves if c.mode == mode]
    colours = _colours([c.label for c in curves])
    fig = make_subplots(rows=2, cols=2, subplot_titles=[LATENCY_TITLES[k] for k in LATENCY_TITLES])
    for index, key in enumerate(LATENCY_TITLES):
        row, col = divmod(index, 2)
        for curve in curves:
            for trace in _latency_traces(curve, key, colours[curve.label], legend=index == 0):
                fig.add_trace(trace, row=row + 1, col=col + 1)
        fig.update_xaxes(title_text=LOAD_TITLES[mode], row=row + 1, col=col + 1)
        fig.update_yaxes(title_text="ms", rangemode="tozero", row=row + 1, col=col + 1)
    fig.update_layout(
        title=f"latency vs load ({mode}): measured, and predicted by gpuplan simulate",
        height=800,
        legend={"orientation": "h", "y": -0.12},
    )
    return go.Figure(fig)


def _throughput_traces(curve: Curve, colour: str, key: str, legend: bool) -> list[Any]:
    go, _ = plotly_modules()
    measured_key = {"output_tokens_per_s": "output_tokens_per_s", "requests_per_s": "achieved_rate"}[key]
    traces = [
        go.Scatter(
            x=[v.load for v in curve.runs],
            y=[v.measured(measured_key) for v in curve.runs],
            mode="lines+markers",
            name=f"measured: {curve.label}",
            line={"color": colour},
            legendgroup=f"{curve.label} measured",
            showlegend=legend,
        )
    ]
    if curve.predicted:
        traces.append(
            go.Scatter(
                x=[p.load for p in curve.predicted],
                y=[getattr(p, key) for p in curve.predicted],
                mode="lines",
                name=f"predicted: {curve.deployment.label if curve.deployment else ''}",
                line={"color": colour, "dash": "dot"},
                legendgroup=f"{curve.label} predicted",
                showlegend=legend,
            )
        )
    return traces


def throughput_figure(report: Report, mode: str) -> Any:
    """Output tokens/s and completed requests/s against load, measured and predicted."""
    go, make_subplots = plotly_modules()
    curves = [c for c in report.curves if c.mode == mode]
    colours = _colours([c.label for c in curves])
    fig = make_subplots(rows=1, cols=2, subplot_titles=("output tokens/s", "requests/s"))
    for col, key in enumerate(("output_tokens_per_s", "requests_per_s"), start=1):
        for curve in curves:
            for trace in _throughput_traces(curve, colours[curve.label], key, legend=col == 1):
                fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(title_text=LOAD_TITLES[mode], row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(
        title=f"throughput vs load ({mode})", height=500, legend={"orientation": "h", "y": -0.2}
    )
    return go.Figure(fig)


def _cdf_trace(view: RunView, values: Sequence[float], colour: str, legend: bool) -> Any:
    go, _ = plotly_modules()
    n = len(values)
    return go.Scatter(
        x=list(values),
        y=[(i + 1) / n for i in range(n)],
        mode="lines",
        name=f"run {view.run.run_id[:12]}",
        line={"color": colour, "shape": "hv"},
        legendgroup=view.run.run_id,
        showlegend=legend,
    )


def cdf_figure(report: Report) -> Any:
    """The CDFs of TTFT and TPOT, one line per run (the share of requests at or below each value)."""
    go, make_subplots = plotly_modules()
    colours = _colours([v.run.run_id for v in report.runs])
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT CDF", "TPOT CDF"))
    for col, attr in enumerate(("ttft_cdf_ms", "tpot_cdf_ms"), start=1):
        for view in report.runs:
            values = getattr(view, attr)
            if values:
                fig.add_trace(_cdf_trace(view, values, colours[view.run.run_id], col == 1), row=1, col=col)
        fig.update_xaxes(title_text="ms", row=1, col=col)
        fig.update_yaxes(title_text="share of requests", range=[0, 1.02], row=1, col=col)
    fig.update_layout(title="latency CDFs per run", height=450)
    return go.Figure(fig)


def report_charts(report: Report) -> list[Chart]:
    """Every chart of the report: latency and throughput per load axis present, then the CDFs."""
    charts: list[Chart] = []
    for mode in report.modes:
        charts.append(Chart(f"latency-{mode}", f"Latency vs load ({mode})", latency_figure(report, mode)))
        charts.append(
            Chart(f"throughput-{mode}", f"Throughput vs load ({mode})", throughput_figure(report, mode))
        )
    charts.append(Chart("cdf", "Latency CDFs", cdf_figure(report)))
    return charts


def chart_html(chart: Chart, *, include_plotlyjs: bool) -> str:
    """The chart as a ``<div>`` for a page (plotly.js embedded once, in the first: offline, no CDN)."""
    text: str = chart.figure.to_html(
        full_html=False, include_plotlyjs=include_plotlyjs, div_id=f"chart-{chart.id}"
    )
    return text


def write_pngs(charts: Sequence[Chart], paths: Sequence[Path]) -> None:
    """Each chart as a PNG (kaleido and a local Chromium), in one kaleido session: one browser for all
    of them (separate ``write_image`` calls in a row have failed with ``kaleido_scopes is not defined``)."""
    try:
        importlib.import_module("kaleido")
    except ImportError:
        raise UserInputError("--png: kaleido is not installed", hint=PNG_HINT) from None
    try:
        importlib.import_module("plotly.io").write_images(
            [c.figure for c in charts],
            [str(p) for p in paths],
            format="png",
            width=[PNG_WIDTH_PX] * len(charts),
            height=[c.figure.layout.height or PNG_HEIGHT_PX for c in charts],
        )
    except OSError as exc:
        raise UserInputError(f"--png: cannot write the charts: {exc.strerror or exc}") from None
    except Exception as exc:  # kaleido/choreographer: no browser found, browser failed to start
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise UserInputError(f"--png: PNG export failed ({detail})", hint=PNG_HINT) from None

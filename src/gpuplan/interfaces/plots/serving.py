"""Plotly figures of gpuplan's answers, shared by the CLI (``--plot``) and the web app.

Figures only: it turns answers the use cases computed (a :class:`Recommendation`, a
:class:`FitResult`, GPU offers, the throughput points of
:func:`gpuplan.usecases.recommend.throughput_scaling`, a simulation) into plotly figures, and
writes them as offline HTML (plotly.js embedded, no CDN) or PNG (kaleido, which drives a local
Chromium/Chrome; no network). It predicts, searches and simulates nothing itself
(tests/unit/interfaces/plots/test_plots_draw_only.py). plotly is an optional dependency (extra
``plot``), imported by name so that gpuplan runs and type-checks without it.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gpuplan.core.errors import UserInputError
from gpuplan.core.sim.metrics import per_request_s
from gpuplan.core.units import GB, GIB, TB
from gpuplan.usecases.recommend import SCALING_GPU_COUNTS

if TYPE_CHECKING:  # the answers drawn; names for the annotations only
    from gpuplan.core.recommend.request import GpuOffer, Plan, Recommendation
    from gpuplan.core.sim.simulator import SimResult
    from gpuplan.usecases.fit import FitResult
    from gpuplan.usecases.recommend import ScalingPoint

CostAxis = Literal["usd_per_month", "usd_per_million_output_tokens", "usd_per_hour"]
LatencyAxis = Literal["ttft_ms", "tpot_ms"]
PlanLatency = Literal["ttft_ms", "tpot_ms", "ttft_p99_ms", "tpot_p99_ms"]
"""The plan field a cost-vs-latency chart draws: a mean (a LatencyAxis) or its P99."""
P99_FIELDS: dict[LatencyAxis, PlanLatency] = {"ttft_ms": "ttft_p99_ms", "tpot_ms": "tpot_p99_ms"}


def latency_statistic(rec: Recommendation) -> Literal["mean", "p99"]:
    """The latency statistic a table and its cost-vs-latency chart both show: the one the plans were
    sized on (P99 when any plan was sized on simulated P99s, else the steady-state mean)."""
    return "p99" if any(p.sized_on == "p99" for p in rec.plans) else "mean"


def plotted_latency(rec: Recommendation, axis: LatencyAxis) -> PlanLatency:
    """The plan field drawn for ``axis``: its P99 when the plans were sized on P99s."""
    return P99_FIELDS[axis] if latency_statistic(rec) == "p99" else axis


PLOT_HINT = "pip install 'gpuplan[plot]'"
PNG_HINT = (
    "PNG export uses kaleido and a local Chromium or Chrome: pip install kaleido, apt-get install chromium"
)
MEMORY_MAX_PLANS = 5
"""Plans (the top ones) in the memory charts of recommend and train-plan."""
AXIS_TITLES = {
    "usd_per_month": "cost, $/month",
    "usd_per_hour": "cost, $/hour",
    "usd_per_million_output_tokens": "$ per 1M output tokens",
    "ttft_ms": "mean TTFT at the target load, ms",
    "tpot_ms": "mean TPOT at the target load, ms",
    "ttft_p99_ms": "P99 TTFT at the target load, ms",
    "tpot_p99_ms": "P99 TPOT at the target load, ms",
}
MEMORY_PARTS = (
    ("weights", "weights"),
    ("kv_cache", "KV-cache pool"),
    ("activation", "activation peak"),
    ("overhead", "runtime overhead"),
)


def plotly_modules() -> tuple[Any, Any]:
    """``plotly.graph_objects`` and ``make_subplots``; a one-line UserInputError without plotly."""
    try:
        go = importlib.import_module("plotly.graph_objects")
        make_subplots = importlib.import_module("plotly.subplots").make_subplots
    except ImportError:
        raise UserInputError("plots need plotly, which is not installed", hint=PLOT_HINT) from None
    return go, make_subplots


def gpu_colours(gpu_ids: Sequence[str]) -> dict[str, str]:
    """A fixed colour per GPU id (in the order given) so that every chart colours a GPU alike."""
    palette = importlib.import_module("plotly.colors").qualitative.Dark24
    return {gpu: palette[i % len(palette)] for i, gpu in enumerate(dict.fromkeys(gpu_ids))}


def _plan_label(rank: int, p: Plan) -> str:
    return f"{rank}. {p.layout.num_gpus}x {p.gpu} tp{p.layout.tp} pp{p.layout.pp} {p.layout.weight_dtype}"


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both axes (lower is better), sorted by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


Point = tuple[float, float, str]
"""(x, y, hover label) of one plan on a cost-vs-time chart."""


def scatter_with_front(
    points_by_gpu: dict[str, list[Point]], hovertemplate: str, legendgroup: str | None = None
) -> list[Any]:
    """One marker trace per GPU type (in the catalog colours) and a dotted trace of the Pareto front."""
    go, _ = plotly_modules()
    colours = gpu_colours(list(points_by_gpu))
    traces: list[Any] = []
    for gpu, xy in points_by_gpu.items():
        traces.append(
            go.Scatter(
                x=[x for x, _, _ in xy],
                y=[y for _, y, _ in xy],
                text=[t for _, _, t in xy],
                mode="markers",
                name=gpu,
                marker={"size": 12, "color": colours[gpu]},
                legendgroup=legendgroup,
                hovertemplate=hovertemplate,
            )
        )
    front = pareto_front([(x, y) for xy in points_by_gpu.values() for x, y, _ in xy])
    traces.append(
        go.Scatter(
            x=[x for x, _ in front],
            y=[y for _, y in front],
            mode="lines",
            name="Pareto front",
            line={"dash": "dot", "color": "grey"},
            hoverinfo="skip",
            legendgroup=legendgroup,
        )
    )
    return traces


def pareto_traces(rec: Recommendation, cost: CostAxis, latency: PlanLatency) -> list[Any]:
    """One scatter trace per GPU type (one point per plan) and the cost-latency front."""
    by_gpu: dict[str, list[Point]] = {}
    for rank, p in enumerate(rec.plans, start=1):
        x, y = getattr(p, cost), getattr(p, latency)
        by_gpu.setdefault(p.gpu, [])
        if _finite(x) and _finite(y):
            by_gpu[p.gpu].append((x, y, _plan_label(rank, p)))
    return scatter_with_front(by_gpu, "%{text}<br>%{x:,.2f} / %{y:,.1f}<extra></extra>", legendgroup="pareto")


def pareto_figure(
    rec: Recommendation, cost: CostAxis = "usd_per_month", latency: PlanLatency = "ttft_ms"
) -> Any:
    """Cost vs latency (a mean or a P99, named on the axis), one point per ranked plan, coloured by GPU."""
    go, _ = plotly_modules()
    fig = go.Figure(pareto_traces(rec, cost, latency))
    fig.update_layout(
        title=f"{rec.model}: cost vs latency of the ranked plans",
        xaxis_title=AXIS_TITLES[cost],
        yaxis_title=AXIS_TITLES[latency],
    )
    return fig


def memory_traces(plans: Sequence[Plan]) -> list[Any]:
    """Stacked bars of one GPU's start-up memory per plan, and the usable capacity as a marker."""
    go, _ = plotly_modules()
    top = list(plans)[:MEMORY_MAX_PLANS]
    labels = [_plan_label(i + 1, p) for i, p in enumerate(top)]
    traces = [
        go.Bar(
            x=labels, y=[getattr(p.memory_breakdown_gib, key) for p in top], name=name, legendgroup="memory"
        )
        for key, name in MEMORY_PARTS
    ]
    traces.append(
        go.Scatter(
            x=labels,
            y=[p.memory_breakdown_gib.capacity for p in top],
            mode="markers",
            name="usable capacity",
            marker={"symbol": "line-ew-open", "size": 30},
            legendgroup="memory",
        )
    )
    return traces


def memory_figure(plans: Sequence[Plan]) -> Any:
    """Where one GPU's memory goes for the top plans (the engine's start-up accounting)."""
    go, _ = plotly_modules()
    fig = go.Figure(memory_traces(plans))
    fig.update_layout(barmode="stack", title="memory per GPU of the top plans", yaxis_title="GiB")
    return fig


def fit_figure(result: FitResult) -> Any:
    """``gpuplan fit`` as one stacked bar against the memory budget and the usable memory."""
    go, _ = plotly_modules()
    m = result.memory
    parts = (
        ("weights", m.weights_bytes),
        ("activation peak", m.activation_bytes),
        ("runtime overhead", m.overhead_bytes),
        ("KV-cache pool", m.kv_pool_bytes),
    )
    label = f"{result.layout.gpus_per_replica}x {result.gpu} {result.layout.weight_dtype}"
    fig = go.Figure([go.Bar(x=[label], y=[value / GIB], name=name) for name, value in parts])
    for name, value, dash in (("budget", m.budget_bytes, "dash"), ("usable", m.usable_bytes, "solid")):
        fig.add_hline(y=value / GIB, line_dash=dash, annotation_text=f"{name} {value / GIB:.1f} GiB")
    verdict = "fits" if m.fits else "does NOT fit"
    fig.update_layout(
        barmode="stack",
        yaxis_title="GiB per GPU",
        title=f"{result.model} on {label}: {verdict}, {m.kv_tokens:,} KV tokens per replica",
    )
    return fig


def throughput_traces(points: Sequence[ScalingPoint], gpu_order: Sequence[str] = ()) -> list[Any]:
    """One line per GPU type; ``gpu_order`` (the plans' GPUs) keeps the colours of the other charts."""
    go, _ = plotly_modules()
    traces = []
    for gpu, colour in gpu_colours([*gpu_order, *(p.gpu for p in points)]).items():
        mine = [p for p in points if p.gpu == gpu]
        if mine:
            traces.append(
                go.Scatter(
                    x=[p.gpus for p in mine],
                    y=[p.output_tokens_per_s for p in mine],
                    mode="lines+markers",
                    name=f"{gpu} {mine[0].weight_dtype}",
                    line={"color": colour},
                    legendgroup="throughput",
                )
            )
    return traces


def throughput_figure(points: Sequence[ScalingPoint], gpu_order: Sequence[str] = ()) -> Any:
    """Saturated output tokens/s vs GPUs (one tensor-parallel replica), one line per GPU type."""
    go, _ = plotly_modules()
    fig = go.Figure(throughput_traces(points, gpu_order))
    fig.update_layout(
        title="throughput vs GPUs (offline, one tensor-parallel replica)",
        xaxis={"title": "GPUs", "type": "log", "tickvals": list(SCALING_GPU_COUNTS)},
        yaxis_title="output tokens/s",
    )
    return fig


def gpu_comparison_figure(offers: Sequence[GpuOffer]) -> Any:
    """Memory, bandwidth, dense BF16 TFLOPS and price of each catalog GPU, side by side."""
    go, make_subplots = plotly_modules()
    metrics: tuple[tuple[str, Callable[[GpuOffer], float | None]], ...] = (
        ("memory, GB", lambda o: o.gpu.memory_bytes / GB),
        ("bandwidth, TB/s", lambda o: o.gpu.memory_bandwidth_bytes_per_s / TB),
        ("dense BF16 TFLOPS", lambda o: o.gpu.sixteen_bit_tflops),
        ("$ per GPU-hour", lambda o: o.usd_per_gpu_hour),
    )
    fig = make_subplots(rows=len(metrics), cols=1, shared_xaxes=True, subplot_titles=[m[0] for m in metrics])
    ids = [o.gpu.id for o in offers]
    for row, (_, value) in enumerate(metrics, start=1):
        fig.add_trace(go.Bar(x=ids, y=[value(o) for o in offers], showlegend=False), row=row, col=1)
    fig.update_layout(title="GPU catalog", height=900)
    return fig


def recommendation_figure(
    rec: Recommendation,
    points: Sequence[ScalingPoint],
    cost: CostAxis = "usd_per_month",
    latency: LatencyAxis = "ttft_ms",
) -> Any:
    """The three recommendation charts in one figure (``recommend --plot``); the latency drawn is the
    statistic the plans were sized on (``plotted_latency``), as the table shows it."""
    go, make_subplots = plotly_modules()
    field = plotted_latency(rec, latency)
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("cost vs latency", "memory per GPU (top plans)", "throughput vs GPUs (offline)"),
    )
    for col, traces in enumerate(
        (
            pareto_traces(rec, cost, field),
            memory_traces(rec.plans),
            throughput_traces(points, [p.gpu for p in rec.plans]),
        ),
        start=1,
    ):
        for trace in traces:
            fig.add_trace(trace, row=1, col=col)
    fig.update_xaxes(title_text=AXIS_TITLES[cost], row=1, col=1)
    fig.update_yaxes(title_text=AXIS_TITLES[field], row=1, col=1)
    fig.update_yaxes(title_text="GiB", row=1, col=2)
    fig.update_xaxes(title_text="GPUs", type="log", tickvals=list(SCALING_GPU_COUNTS), row=1, col=3)
    fig.update_yaxes(title_text="output tokens/s", row=1, col=3)
    fig.update_layout(
        barmode="stack", title=f"{rec.model} (objective: {rec.objective})", width=1800, height=700
    )
    return go.Figure(fig)


def simulation_figure(result: SimResult) -> Any:
    """``simulate --plot``: batch size, KV use and preemptions (running total) per replica over simulated
    time, and E2E by arrival."""
    go, make_subplots = plotly_modules()
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        subplot_titles=(
            "decoding sequences per step",
            "KV cache use",
            "preemptions so far",
            "request E2E (s) by arrival",
        ),
    )
    for index, tl in enumerate(result.timelines):
        rows = (
            (tl.decode, f"replica {index} batch"),
            (tl.kv_fraction, f"replica {index} KV"),
            (np.cumsum(tl.preempted).tolist(), f"replica {index} preemptions"),
        )
        for row, (values, name) in enumerate(rows, start=1):
            fig.add_trace(go.Scattergl(x=tl.t_s, y=values, mode="lines", name=name), row=row, col=1)
    e2e = per_request_s(result)["e2e"]
    fig.add_trace(
        go.Scattergl(x=result.arrival_s, y=e2e, mode="markers", name="E2E", marker={"size": 3}), row=4, col=1
    )
    fig.update_xaxes(title_text="simulated time (s)", row=4, col=1)
    return fig


def figure_json(fig: Any) -> dict[str, Any]:
    """The figure as plain JSON (data + layout) for ``Plotly.newPlot`` in the browser."""
    data: dict[str, Any] = json.loads(fig.to_json())
    return data


def write_figure(fig: Any, path: Path) -> None:
    """``.html``: a standalone page with plotly.js embedded (works offline); ``.png``: via kaleido."""
    suffix = path.suffix.lower()
    if suffix not in (".html", ".png"):
        raise UserInputError(f"--plot {path}: the file must end in .html or .png")
    try:
        if suffix == ".html":
            fig.write_html(str(path), include_plotlyjs=True, full_html=True)
        else:
            _write_png(fig, path)
    except OSError as exc:
        raise UserInputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_png(fig: Any, path: Path) -> None:
    try:
        importlib.import_module("kaleido")
    except ImportError:
        raise UserInputError(f"cannot write {path}: kaleido is not installed", hint=PNG_HINT) from None
    try:
        fig.write_image(str(path), format="png")
    except OSError:
        raise
    except Exception as exc:  # kaleido/choreographer: no browser found, browser failed to start
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(f"cannot write {path}: PNG export failed ({detail})", hint=PNG_HINT) from None


def write_recommendation_plot(path: Path, rec: Recommendation, points: Sequence[ScalingPoint]) -> None:
    """``recommend --plot``: Pareto, memory and throughput-vs-GPUs charts in one HTML or PNG file
    (``points``: :func:`gpuplan.usecases.recommend.throughput_scaling` of ``rec``)."""
    write_figure(recommendation_figure(rec, points), path)


def write_fit_plot(path: Path, result: FitResult) -> None:
    """``fit --plot``: the memory breakdown chart."""
    write_figure(fit_figure(result), path)


def write_simulation_plot(path: Path, result: SimResult) -> None:
    """``simulate --plot``: the timeline chart."""
    write_figure(simulation_figure(result), path)

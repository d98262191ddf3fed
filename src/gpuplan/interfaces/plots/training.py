"""Plotly figures of ``train-plan`` answers (the web page's training view).

Cost vs time-to-train (one point per ranked plan, coloured by GPU, with the Pareto front) and the
training memory of one GPU for the top plans, stacked by part (the bars of
:func:`gpuplan.usecases.train.train_memory_bars`). Figures only, as in
:mod:`gpuplan.interfaces.plots.serving`; plotly is optional there too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuplan.core.units import GIB
from gpuplan.interfaces.plots.serving import Point, plotly_modules, scatter_with_front

if TYPE_CHECKING:  # the answers drawn; names for the annotations only
    from gpuplan.usecases.train import TrainMemoryBar, TrainPlanResult
    from gpuplan.usecases.training_plan import TrainPlan

TRAIN_COST_KIND = "on_demand"
"""The price kind on the cost axis of the training Pareto chart."""
TRAIN_MEMORY_PARTS = (
    ("weights_bytes", "weights"),
    ("gradients_bytes", "gradients"),
    ("optimizer_bytes", "optimizer states"),
    ("activations_bytes", "activations"),
    ("logits_bytes", "logits"),
    ("overhead_bytes", "overhead"),
)


def train_plan_label(rank: int, plan: TrainPlan) -> str:
    return f"{rank}. {plan.gpus}x {plan.gpu} {plan.layout}"


def train_pareto_figure(result: TrainPlanResult) -> Any:
    """On-demand cost vs time-to-train, one point per ranked plan coloured by GPU, and the front."""
    go, _ = plotly_modules()
    by_gpu: dict[str, list[Point]] = {}
    for rank, p in enumerate(result.plans, start=1):
        by_gpu.setdefault(p.gpu, [])
        cost = p.cost.usd_by_price_kind.get(TRAIN_COST_KIND)
        if cost is not None:
            by_gpu[p.gpu].append((cost, p.cost.wall_hours, train_plan_label(rank, p)))
    traces = scatter_with_front(by_gpu, "%{text}<br>$%{x:,.2f}, %{y:,.2f} h<extra></extra>")
    fig = go.Figure(traces)
    fig.update_layout(
        title=f"{result.model} {result.method}, {result.tokens:.3g} tokens: cost vs time to train",
        xaxis_title="cost of the run, $ on-demand",
        yaxis_title="time to train, hours",
    )
    return fig


def train_memory_figure(bars: Sequence[TrainMemoryBar]) -> Any:
    """One GPU's training memory of the top plans, stacked by part, with the peak and usable memory.

    Gradients and activations peak at different times when nothing accumulates, so the stack can
    stand above the peak marker.
    """
    go, _ = plotly_modules()
    labels = [f"{b.rank}. {b.gpus}x {b.gpu}" for b in bars]
    traces = [
        go.Bar(x=labels, y=[getattr(b.memory, key) / GIB for b in bars], name=name)
        for key, name in TRAIN_MEMORY_PARTS
    ]
    for name, values, symbol in (
        ("peak", [b.memory.total_bytes / GIB for b in bars], "diamond"),
        ("usable capacity", [b.usable_gib for b in bars], "line-ew-open"),
    ):
        traces.append(
            go.Scatter(x=labels, y=values, mode="markers", name=name, marker={"symbol": symbol, "size": 14})
        )
    fig = go.Figure(traces)
    fig.update_layout(barmode="stack", title="training memory per GPU of the top plans", yaxis_title="GiB")
    return fig

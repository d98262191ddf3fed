"""Plotly figure of a rent-vs-buy answer (``gpuplan tco --plot``): money spent by month, renting and
owning (the answer's ``by_month``, computed by the use case), and the break-even month. plotly is
imported by name (extra ``plot``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.interfaces.plots.serving import plotly_modules, write_figure

if TYPE_CHECKING:
    from gpuplan.usecases.tco import TcoAnswer


def tco_figure(answer: TcoAnswer) -> Any:
    """Cumulative $ of renting and of owning by month, with the break-even month marked."""
    go, _ = plotly_modules()
    points = answer.by_month
    months = [p.month for p in points]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=months, y=[p.rent_usd for p in points], name="rent", mode="lines"))
    fig.add_trace(go.Scatter(x=months, y=[p.own_usd for p in points], name="own", mode="lines"))
    if answer.break_even_months is not None and answer.break_even_months <= answer.horizon_months:
        fig.add_vline(
            x=answer.break_even_months,
            line_dash="dash",
            annotation_text=f"break-even {answer.break_even_months:.1f} months",
        )
    title = f"Rent vs buy: {answer.gpus}x {answer.gpu}, {answer.rent_quote.usd_per_gpu_hour:g} $/GPU-h rented"
    fig.update_layout(title=title, xaxis_title="month", yaxis_title="money spent, $", template="plotly_white")
    return fig


def write_tco_plot(path: Path, answer: TcoAnswer) -> None:
    """``tco --plot FILE.html|png``."""
    write_figure(tco_figure(answer), path)

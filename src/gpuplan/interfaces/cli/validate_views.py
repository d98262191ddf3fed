"""``gpuplan validate --by``: the error of each group of rows, one table (docs/validate.md, Breakdown)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.interfaces.cli.render import table
from gpuplan.usecases.validation.report import GroupStats


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def breakdown(groups: Sequence[GroupStats], *, title: str) -> None:
    """One row per group and metric: its keys, n, median APE and MAPE."""
    if not groups:
        return
    keys = list(groups[0].key)
    table(
        title,
        [*keys, "metric", "n", "median APE", "MAPE"],
        [
            (*g.key.values(), g.metric, g.stats.n, _pct(g.stats.median_ape), _pct(g.stats.mape))
            for g in groups
        ],
    )

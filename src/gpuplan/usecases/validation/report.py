"""Error statistics by metric and quality grade, in the ``gpuplan validate`` JSON contract."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from pydantic import Field

from gpuplan.core.frozen import FrozenModel
from gpuplan.usecases.validation.predict import RowResult
from gpuplan.usecases.validation.regimes import REGIMES


class MetricStats(FrozenModel):
    n: int
    mape: float | None
    median_ape: float | None
    p90_ape: float | None


class Summary(FrozenModel):
    rows: int
    predicted: int
    skipped: int
    by_metric: dict[str, MetricStats]
    by_grade: dict[str, MetricStats]
    by_regime: dict[str, dict[str, MetricStats]] = Field(default_factory=dict)
    """Per regime (``usecases/validation/regimes.py``), per metric."""


class GroupStats(FrozenModel):
    """The error of one group of rows on one metric (``validate --by``); ``key`` maps each ``--by`` name
    to the group's value."""

    key: dict[str, str]
    metric: str
    stats: MetricStats


class ValidationReport(FrozenModel):
    """``{"summary": ..., "rows": [...]}`` as documented in docs/validate.md; ``breakdown`` only with ``--by``."""

    file: str
    schema_name: str
    grades: list[str]
    summary: Summary
    rows: list[RowResult]
    breakdown: list[GroupStats] = Field(default_factory=list)


def stats(apes: Sequence[float]) -> MetricStats:
    """Mean, median and p90 of absolute percentage errors (as fractions)."""
    if not apes:
        return MetricStats(n=0, mape=None, median_ape=None, p90_ape=None)
    arr = np.asarray(apes, dtype=float)
    return MetricStats(
        n=len(apes),
        mape=float(arr.mean()),
        median_ape=float(np.median(arr)),
        p90_ape=float(np.percentile(arr, 90)),
    )


def summarise(rows: Iterable[RowResult]) -> Summary:
    """Counts and error statistics per metric and per grade.

    A row is predicted when it has a prediction; its APE is undefined (and left out of the statistics)
    only when the measured value is 0 (e.g. ``fits`` = 0).
    """
    rows = list(rows)
    done = [r for r in rows if r.predicted is not None]
    by_metric: dict[str, list[float]] = {}
    by_grade: dict[str, list[float]] = {}
    by_regime: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if r.ape is None:
            continue
        by_metric.setdefault(r.metric, []).append(r.ape)
        by_grade.setdefault(r.quality or "?", []).append(r.ape)
        by_regime.setdefault(r.regime, {}).setdefault(r.metric, []).append(r.ape)
    return Summary(
        rows=len(rows),
        predicted=len(done),
        skipped=len(rows) - len(done),
        by_metric={k: stats(v) for k, v in sorted(by_metric.items())},
        by_grade={k: stats(v) for k, v in sorted(by_grade.items())},
        by_regime={
            regime: {m: stats(v) for m, v in sorted(by_regime[regime].items())}
            for regime in REGIMES
            if regime in by_regime
        },
    )

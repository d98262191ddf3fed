"""Held-out error: refit the calibration without one group (a GPU or a model) and predict that group.

The bundled factors were fitted on every development row, so ``gpuplan validate`` on the same rows
measures fit, not generalisation. Leaving one GPU (or model) out at a time estimates the error a user
meets on hardware or models the calibration never saw, which is the question that matters before buying.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.frozen import FrozenModel
from gpuplan.usecases.calibration.published import fit_calibration
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.predict import RowResult, predict_case
from gpuplan.usecases.validation.report import MetricStats, Summary, stats, summarise

GroupBy = Literal["gpu", "model"]
MIN_TRAINING_ROWS = 10
"""A fold with fewer rows left to fit on is skipped: the prior would dominate and say nothing."""


class FoldResult(FrozenModel):
    """Error on one held-out group."""

    group: str
    rows: int
    stats: MetricStats


class CrossValidation(FrozenModel):
    """Leave-one-group-out result: per fold and pooled over every held-out row."""

    by: GroupBy
    folds: list[FoldResult]
    summary: Summary
    rows: list[RowResult]


def _key(by: GroupBy) -> Callable[[Case], str]:
    return lambda case: case.get(by) or "?"


def cross_validate(
    cases: Sequence[Case], catalog: Catalog, prior: Calibration, *, by: GroupBy
) -> CrossValidation:
    """Fit without each group in turn and predict that group with the refitted factors."""
    key = _key(by)
    folds: list[FoldResult] = []
    held_out: list[RowResult] = []
    for group in sorted({key(c) for c in cases}):
        train = [c for c in cases if key(c) != group]
        test = [c for c in cases if key(c) == group]
        if len(train) < MIN_TRAINING_ROWS:
            continue
        cal, _ = fit_calibration(
            train, catalog, prior, data=f"all but {by}={group}", command="cross-validation"
        )
        results = [predict_case(c, catalog, cal) for c in test]
        held_out += results
        folds.append(
            FoldResult(
                group=group, rows=len(test), stats=stats([r.ape for r in results if r.ape is not None])
            )
        )
    return CrossValidation(by=by, folds=folds, summary=summarise(held_out), rows=held_out)

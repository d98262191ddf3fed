"""Held-out error: refit the calibration without one group (a GPU or a model) and predict that group.

The bundled factors were fitted on every development row, so ``gpuplan validate`` on the same rows
measures fit, not generalisation. Leaving one GPU (or model) out at a time estimates the error a user
meets on hardware or models the calibration never saw, which is the question that matters before buying.
Each fold refits as ``gpuplan validate --fit-out`` does (``published_serving.fit_calibration``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.usecases.calibration.published_serving import fit_calibration
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult, predict_case
from gpuplan.usecases.validation.report import MetricStats, Summary, stats, summarise

GroupBy = Literal["gpu", "model"]
GROUPINGS: dict[str, GroupBy] = {"gpu": "gpu", "model": "model"}
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


def cross_validate_file(path: Path, catalog: Catalog, *, grades: Sequence[str], by: str) -> CrossValidation:
    """``gpuplan validate --cross-validate``: leave-one-GPU (or model) -out error of the inference
    calibration, refitted from the bundled priors, on a validation CSV's rows of ``grades``."""
    if by not in GROUPINGS:
        raise UserInputError(f"--cross-validate {by!r} is not one of gpu, model")
    schema, cases = read_cases(path)
    if schema != "inference":
        raise UserInputError(f"--cross-validate needs inference.csv rows; {path} holds {schema} rows")
    chosen = [c for c in cases if c.quality in set(grades)]
    return cross_validate(chosen, catalog, prior_calibration(), by=GROUPINGS[by])

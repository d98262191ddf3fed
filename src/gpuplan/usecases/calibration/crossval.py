"""Held-out error: refit the calibration without one group (a GPU or a model) and predict that group.

The bundled factors were fitted on every development row, so ``gpuplan validate`` on the same rows
measures fit, not generalisation. Leaving one GPU (or model) out at a time estimates the error a user
meets on hardware or models the calibration never saw, which is the question that matters before buying.
Each fold refits as ``gpuplan validate --fit-out`` does (``published_serving.fit_calibration``).

Load sweeps (``serving_sweeps.csv``: every row a finite ``--num-prompts`` run) are predicted with both
halves of the bundled calibration, so a fold refits both without the held-out group: the inference
factors on ``inference.csv`` (grades A,B, as bundled; the file beside the sweeps) and the release-line
factors on the other groups' sweeps (``release_lines.fit_release_lines``). A release line whose only
sweeps are held out runs at its engine's factors, which is what a user of that line meets.
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
from gpuplan.usecases.calibration.release_lines import fit_release_lines
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult, predict_case
from gpuplan.usecases.validation.predict_sweep import finite_prompts
from gpuplan.usecases.validation.report import MetricStats, Summary, stats, summarise

GroupBy = Literal["gpu", "model"]
GROUPINGS: dict[str, GroupBy] = {"gpu": "gpu", "model": "model"}
MIN_TRAINING_ROWS = 10
"""A fold with fewer rows left to fit on is skipped: the prior would dominate and say nothing."""
INFERENCE_FILE = "inference.csv"
INFERENCE_GRADES = ("A", "B")
"""What the bundled inference factors are fitted on (``data/calibration/calibration.yaml``'s header)."""
Refit = Callable[[str], Calibration]
"""A fold's calibration, refitted without the named group."""


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

    def refit(group: str) -> Calibration:
        train = [c for c in cases if key(c) != group]
        return fit_calibration(
            train, catalog, prior, data=f"all but {by}={group}", command="cross-validation"
        )[0]

    trainable = {g for g in {key(c) for c in cases} if sum(key(c) != g for c in cases) >= MIN_TRAINING_ROWS}
    return _held_out(cases, catalog, by=by, groups=trainable, refit=refit)


def cross_validate_sweeps(
    sweeps: Sequence[Case], inference: Sequence[Case], catalog: Catalog, prior: Calibration, *, by: GroupBy
) -> CrossValidation:
    """Load sweeps held out by group: inference factors refitted on ``inference`` and release-line
    factors on ``sweeps``, both without the group (module docstring)."""
    key = _key(by)

    def refit(group: str) -> Calibration:
        train = [c for c in inference if key(c) != group]
        fitted = fit_calibration(
            train, catalog, prior, data=f"all but {by}={group}", command="cross-validation"
        )
        cal = fitted[0].model_copy(update={"release_lines": {}})
        lines = fit_release_lines([c for c in sweeps if key(c) != group], catalog, cal)
        return cal.model_copy(update={"release_lines": lines})

    trainable = {
        g for g in {key(c) for c in sweeps} if sum(key(c) != g for c in inference) >= MIN_TRAINING_ROWS
    }
    return _held_out(sweeps, catalog, by=by, groups=trainable, refit=refit)


def _held_out(
    cases: Sequence[Case], catalog: Catalog, *, by: GroupBy, groups: set[str], refit: Refit
) -> CrossValidation:
    """Each of ``groups`` predicted with the calibration ``refit`` without it."""
    key = _key(by)
    folds: list[FoldResult] = []
    held_out: list[RowResult] = []
    for group in sorted(groups):
        test = [c for c in cases if key(c) == group]
        cal = refit(group)
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
    if not (chosen and all(finite_prompts(c) is not None for c in chosen)):
        return cross_validate(chosen, catalog, prior_calibration(), by=GROUPINGS[by])
    beside = path.parent / INFERENCE_FILE
    if not beside.is_file():
        raise UserInputError(
            f"--cross-validate on load sweeps refits the inference factors too, and {beside} is missing",
            hint=f"put {INFERENCE_FILE} (the calibration's training rows) in the folder of {path.name}",
        )
    _, inference = read_cases(beside)
    train = [c for c in inference if c.quality in INFERENCE_GRADES]
    return cross_validate_sweeps(chosen, train, catalog, prior_calibration(), by=GROUPINGS[by])

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

from pydantic import Field

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.usecases.calibration.crossval_training import cross_validate_training
from gpuplan.usecases.calibration.published_serving import fit_calibration, fit_rows
from gpuplan.usecases.calibration.release_lines import RELEASE_LINE_GRADES, fit_release_lines
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult, predict_case
from gpuplan.usecases.validation.predict_sweep import finite_prompts
from gpuplan.usecases.validation.report import GroupStats, MetricStats, Summary, stats, summarise

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
    breakdown: list[GroupStats] = Field(default_factory=list)
    """The held-out rows grouped by ``validate --by`` (empty without it)."""


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

    groups = {key(c) for c in cases}
    return _held_out(cases, catalog, by=by, groups={g for g in groups if _enough(cases, key, g)}, refit=refit)


def cross_validate_sweeps(
    sweeps: Sequence[Case],
    *,
    line_rows: Sequence[Case],
    inference: Sequence[Case],
    catalog: Catalog,
    prior: Calibration,
    by: GroupBy,
) -> CrossValidation:
    """Load ``sweeps`` held out by group: inference factors refitted on ``inference`` and release-line
    factors on ``line_rows`` (the sweeps of ``RELEASE_LINE_GRADES``), both without the group."""
    key = _key(by)

    def refit(group: str) -> Calibration:
        train = [c for c in inference if key(c) != group]
        fitted = fit_calibration(
            train, catalog, prior, data=f"all but {by}={group}", command="cross-validation"
        )
        cal = fitted[0].model_copy(update={"release_lines": {}})
        lines = fit_release_lines([c for c in line_rows if key(c) != group], catalog, cal)
        return cal.model_copy(update={"release_lines": lines})

    analytic = fit_rows(inference)
    groups = {key(c) for c in sweeps}
    return _held_out(
        sweeps, catalog, by=by, groups={g for g in groups if _enough(analytic, key, g)}, refit=refit
    )


def _enough(rows: Sequence[Case], key: Callable[[Case], str], group: str) -> bool:
    return sum(key(c) != group for c in rows) >= MIN_TRAINING_ROWS


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
    """``gpuplan validate --cross-validate``: leave-one-GPU (or model) -out error on a validation CSV's
    rows of ``grades``, the calibration refitted from the bundled priors. Load sweeps (rows stating
    their ``--num-prompts`` run) refit both halves (module docstring), with ``inference.csv`` beside them."""
    if by not in GROUPINGS:
        raise UserInputError(f"--cross-validate {by!r} is not one of gpu, model")
    schema, cases = read_cases(path)
    chosen = [c for c in cases if c.quality in set(grades)]
    if schema == "training":
        return _training_folds(chosen, catalog, by=GROUPINGS[by])
    if schema != "inference":
        raise UserInputError(
            f"--cross-validate needs inference or training rows; {path} holds {schema} rows",
            hint="memory files have no fitted factors: plain `gpuplan validate` is already held out",
        )
    runs = sum(finite_prompts(c) is not None for c in cases)
    if not runs:
        return cross_validate(chosen, catalog, prior_calibration(), by=GROUPINGS[by])
    if runs < len(cases):
        raise UserInputError(
            f"--cross-validate: {path.name} mixes {runs} load-sweep rows (notes with --num-prompts) and "
            f"{len(cases) - runs} other rows",
            hint="keep sweep rows (serving_sweeps.csv) and inference rows (inference.csv) in separate files",
        )
    return cross_validate_sweeps(
        chosen,
        line_rows=[c for c in cases if c.quality in RELEASE_LINE_GRADES],
        inference=_inference_beside(path),
        catalog=catalog,
        prior=prior_calibration(),
        by=GROUPINGS[by],
    )


def _training_folds(cases: Sequence[Case], catalog: Catalog, *, by: GroupBy) -> CrossValidation:
    """``training.csv`` held out by group (``crossval_training``), gathered into folds."""
    rows = cross_validate_training(cases, catalog, by=by)
    group_of = {c.id: _key(by)(c) for c in cases}
    folds: list[FoldResult] = []
    for group in sorted({group_of[r.id] for r in rows}):
        apes = [r.ape for r in rows if group_of[r.id] == group and r.ape is not None]
        size = sum(group_of[r.id] == group for r in rows)
        folds.append(FoldResult(group=group, rows=size, stats=stats(apes)))
    return CrossValidation(by=by, folds=folds, summary=summarise(rows), rows=rows)


def _inference_beside(path: Path) -> list[Case]:
    """The bundled fit's training rows: ``inference.csv`` in the sweeps' folder, grades A,B."""
    beside = path.parent / INFERENCE_FILE
    if not beside.is_file():
        raise UserInputError(
            f"--cross-validate on load sweeps refits the inference factors too, and {beside} is missing",
            hint=f"put {INFERENCE_FILE} (the calibration's training rows) in the folder of {path.name}",
        )
    return [c for c in read_cases(beside)[1] if c.quality in INFERENCE_GRADES]

"""Held-out training error: refit the training factors without one GPU (or model) and predict it.

The bundled training factors (``data/calibration/training.yaml``) were fitted on every development row
of ``training.csv``, so ``gpuplan validate training.csv`` measures fit. A fold here starts from the
bundled factors less every per-family MFU (:func:`training_prior`: only ``default:*`` kept), refits on
the throughput rows of every other group as ``gpuplan calibrate`` does
(``published_training.fit_training_calibration``) and predicts the held-out group's rows, step time and
memory-free metrics included. The shared scalars (GEMM half width, overlaps, the MoE expert factors)
keep their fitted values: no hand-set prior of them is shipped, a stated leak.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.training import DEFAULT_KEY, TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.calibration.published_training import fit_training_calibration
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.predict import RowResult, row_result
from gpuplan.usecases.validation.predict_training import THROUGHPUT_METRICS, predict_training_with

__all__ = ["MIN_TRAINING_FIT_ROWS", "cross_validate_training", "training_prior"]

MIN_TRAINING_FIT_ROWS = 10
"""A fold with fewer throughput rows left to fit on is skipped: the prior would dominate."""


def training_prior(bundled: TrainingCalibration) -> TrainingCalibration:
    """The bundled training factors less every per-family MFU (only ``default:*`` kept) and their
    machine balances, so no fold starts from a family factor fitted on its own GPU."""
    mfu = {k: v for k, v in bundled.mfu.items() if k.split(":")[0] == DEFAULT_KEY}
    return bundled.model_copy(update={"mfu": mfu, "balance_flop_per_byte": {}})


def cross_validate_training(
    cases: Sequence[Case], catalog: Catalog, *, by: str = "gpu", groups: Collection[str] | None = None
) -> list[RowResult]:
    """Each group's rows (of ``groups``, default all; grouped by the ``by`` column) predicted with the
    training factors refitted on the other groups' throughput rows."""
    fit_on = [c for c in cases if c.metric in THROUGHPUT_METRICS]
    prior = training_prior(default_training_calibration())
    results: list[RowResult] = []
    for group in sorted(groups if groups is not None else {c.get(by) for c in cases}):
        train = [c for c in fit_on if c.get(by) != group]
        if len(train) < MIN_TRAINING_FIT_ROWS:
            continue
        tcal = fit_training_calibration(
            train, catalog, prior, data=f"all but {by}={group}", command="training cross-validation"
        )[0]
        results += [_held_out_result(c, catalog, tcal) for c in cases if c.get(by) == group]
    return results


def _held_out_result(case: Case, catalog: Catalog, tcal: TrainingCalibration) -> RowResult:
    """One held-out row: its prediction with the fold's factors and its APE (None when unpredicted)."""
    skip: str | None = None
    try:
        predicted: float | None = predict_training_with(case, catalog, tcal)
    except (Skip, GpuplanError) as why:
        predicted, skip = None, str(why)
    return row_result(case, predicted, skip)

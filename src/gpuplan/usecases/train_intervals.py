"""Intervals on ``train-plan``'s plans: step time and tokens/s from the error model's training-speed family.

Each plan's ``step_time_s``, ``tokens_per_s`` and ``tokens_per_s_per_gpu`` read the group
``training speed/other/<evidence>/engine known/<metric>``: the evidence is ``gpu calibrated`` when the
training calibration has an MFU factor of the GPU's family (as ``validate --intervals`` decides it for a
training row, ``usecases/validation/intervals.py bundled_gpu_fitted``), else ``gpu priors only``. A plan
is the step model of a Megatron/DeepSpeed-style job, which is what the development rows that name their
framework measured, so the engine counts as known. The regime is ``other``: the training residuals
have no load regimes. The interval of a time is the step-time group's, of a rate the rate group's,
each falling back to its deepest ancestor with residuals (``core/calibration/uncertainty.py``).
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.calibration.uncertainty import Bounds, Uncertainty, bounds
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.train import TrainPlanResult
from gpuplan.usecases.training_plan import TrainPlan

FAMILY = "training speed"
REGIME = "other"
TRAIN_FIGURES = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu")
"""Fields of a plan's ``step`` (``StepPrediction``) that get an interval, named as the error model's metrics."""


def mfu_fitted(family: str, cal: TrainingCalibration) -> bool:
    """Whether ``cal`` has an MFU factor of ``family`` (any dtype): its training speed was fitted."""
    return any(key.split(":", 1)[0] == family for key in cal.mfu)


def plan_bounds(plan: TrainPlan, *, fitted: bool, uncertainty: Uncertainty) -> Bounds:
    """``plan``'s step time and tokens/s with their intervals at ``uncertainty.level``."""
    figures = {
        name: (
            float(getattr(plan.step, name)),
            group_path(family=FAMILY, regime=REGIME, gpu_fitted=fitted, engine_known=True, metric=name),
        )
        for name in TRAIN_FIGURES
    }
    return bounds(uncertainty=uncertainty, figures=figures)


def with_training_intervals(
    result: TrainPlanResult,
    catalog: Catalog,
    *,
    cal: TrainingCalibration | None,
    uncertainty: Uncertainty | None,
) -> TrainPlanResult:
    """``result`` with ``interval`` on each plan (unchanged without an error model); ``cal``: the
    training calibration the plans were priced with (None: the bundled one)."""
    if uncertainty is None:
        return result
    factors = cal or default_training_calibration()
    plans = [
        p.model_copy(
            update={
                "interval": plan_bounds(
                    p, fitted=mfu_fitted(catalog.get_gpu(p.gpu).family, factors), uncertainty=uncertainty
                )
            }
        )
        for p in result.plans
    ]
    return result.model_copy(update={"plans": plans})

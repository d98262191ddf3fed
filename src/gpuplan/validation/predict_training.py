"""Predict rows of training.csv and the training rows of memory.csv (training planner)."""

from __future__ import annotations

from gpuplan.catalog import Catalog
from gpuplan.perf.calibration import Calibration
from gpuplan.validation.cases import Case, Skip

TRAINING_SKIP = "training not supported yet"


def predict_training_case(case: Case, catalog: Catalog, cal: Calibration) -> float:
    """The predicted value of a training row's metric; Skip with the reason when it cannot be predicted."""
    raise Skip(TRAINING_SKIP)

"""The bundled calibration profiles: serving factors, their priors, and the training factors."""

from __future__ import annotations

from functools import lru_cache

import yaml

from gpuplan.core.calibration.serving import Calibration, parse_calibration
from gpuplan.core.calibration.training import TrainingCalibration, parse_training_calibration
from gpuplan.data import read_bundled_text

__all__ = ["default_calibration", "default_training_calibration", "prior_calibration"]


@lru_cache(maxsize=1)
def default_calibration() -> Calibration:
    """The bundled serving factors (``calibration/calibration.yaml``, read once, on first use)."""
    text = read_bundled_text("calibration", "calibration.yaml")
    return parse_calibration(yaml.safe_load(text), origin="bundled calibration.yaml")


@lru_cache(maxsize=1)
def prior_calibration() -> Calibration:
    """The hand-set priors the fit starts from and is pulled towards (``calibration/priors.yaml``)."""
    text = read_bundled_text("calibration", "priors.yaml")
    return parse_calibration(yaml.safe_load(text), origin="bundled priors.yaml")


@lru_cache(maxsize=1)
def default_training_calibration() -> TrainingCalibration:
    """The bundled training factors (``calibration/training_calibration.yaml``, read once)."""
    text = read_bundled_text("calibration", "training_calibration.yaml")
    return parse_training_calibration(yaml.safe_load(text), origin="bundled training_calibration.yaml")

"""Predict inference rows of scenario ``server`` / ``rate`` (serving simulator)."""

from __future__ import annotations

from gpuplan.catalog.schema import GpuSpec
from gpuplan.models.spec import ModelSpec
from gpuplan.perf.calibration import Calibration
from gpuplan.validation.cases import Case, Skip

SIM_SKIP = "server/rate scenarios need the serving simulator (not built yet)"


def predict_server_case(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """The predicted value of a server/rate row's metric; Skip with the reason when it cannot be predicted."""
    raise Skip(SIM_SKIP)

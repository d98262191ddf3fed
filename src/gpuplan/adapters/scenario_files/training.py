"""Training scenario files for ``gpuplan predict`` and ``gpuplan fit --scenario``: one training job on
one layout of one GPU type. A scenario document is a training scenario when it has a ``training``
section (docs/scenarios.md); parsing is pure, errors name the file and the line or field.
"""

from __future__ import annotations

from gpuplan.core.frozen import FiniteModel
from gpuplan.core.training.spec import TrainingJob, TrainingLayout


class TrainingHardware(FiniteModel):
    """The GPU type; the count is the layout's tp × pp × dp × cp."""

    gpu: str


class TrainingScenarioFile(FiniteModel):
    """``model``, ``hardware.gpu``, the ``training`` job and its ``layout``."""

    model: str
    hardware: TrainingHardware
    training: TrainingJob
    layout: TrainingLayout = TrainingLayout()

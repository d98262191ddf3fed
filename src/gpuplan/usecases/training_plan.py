"""One ranked training plan (``train-plan``, ``recommend --task train|finetune``): GPU × count, the layout
the search chose for it, its step, memory and cost, priced on the answer's basis."""

from __future__ import annotations

from pydantic import Field

from gpuplan.core.calibration.uncertainty import Bounds
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.pricing import PriceQuote
from gpuplan.core.training.memory import TrainingMemory
from gpuplan.core.training.plan import TrainingCost
from gpuplan.core.training.spec import TrainingLayout
from gpuplan.core.training.step import StepPrediction


class TrainPlan(FrozenModel):
    gpu: str
    gpus: int
    layout: str
    step: StepPrediction
    memory_gib_per_gpu: float
    usable_gib_per_gpu: float = Field(description="usable memory of one GPU (memory_gib_per_gpu is of it)")
    cost: TrainingCost
    price_quote: PriceQuote | None = Field(
        default=None, description="the on-demand quote the plan is priced from, on the answer's price basis"
    )
    price_missing: str = Field(
        default="", description="why the price basis gives this GPU no on-demand price"
    )
    memory: TrainingMemory = Field(
        exclude=True, description="memory by part of the most loaded GPU (not in the JSON answer)"
    )
    parallel: TrainingLayout = Field(
        exclude=True, description="the layout ``layout`` labels (not in the JSON)"
    )
    interval: Bounds | None = Field(
        default=None, description="step time and tokens/s intervals (usecases/train_intervals.py)"
    )

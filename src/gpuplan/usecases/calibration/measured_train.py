"""Training rows of ``gpuplan calibrate`` through the training step model, so that the MFU a fit writes is
the factor ``train-plan`` reads.

A ``bench train`` row (kind ``train``, metric ``tflops``) is one GPU stepping ``batch_size`` sequences of
``seq_len`` tokens of ``model`` (method ``full`` or ``lora`` at ``lora_rank``, default 16; ``checkpointing``
``full`` when the run recomputed activations, else none; AdamW). Its
``value`` is the bench's credited TFLOP/s (``adapters/bench/train/flops.py``), so the measured step time
is ``credited FLOPs × tokens / value``. The model's value for the row is the same quantity with the step
time of ``core/training/step.py predict_step`` on that job and layout (dp = 1, micro-batch =
``batch_size``).

The fit moves one factor per row, ``mfu[family:dtype]`` (``step.mfu_key``: the GEMM efficiency the step
model divides compute by): it solves the MFU that makes the predicted step equal the measured one
(bisection in log space; the step time falls monotonically as the MFU rises), then takes the geometric
median over the rows of a key. The rest of the step (optimizer update, size factor h/(h + h½), weight
streaming) keeps its bundled form, so a row whose step the optimizer or weight streaming dominates
moves the MFU to a bound of ``MFU_RANGE``. The key is per GPU family and dtype: every GPU of that family
shares the fitted value (``train-plan`` says so when it reads a profile).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpuplan.adapters.bench.train.flops import credited_flops_per_token
from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model, model_for_seq_len
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.spec import DEFAULT_LORA_RANK, TrainingJob, TrainingLayout, check_layout
from gpuplan.core.training.step import mfu_key, predict_step
from gpuplan.core.units import TFLOPS
from gpuplan.usecases.calibration.measured_rows import ResultRow
from gpuplan.usecases.train import resolve_method

MFU_RANGE = (0.01, 1.0)
"""Bounds of a fitted MFU: 1 % of the peak, and the peak itself (no efficiency above the datasheet)."""
BISECTION_STEPS = 60
"""Halvings of the log-MFU interval: (log 100) / 2⁶⁰ is far below any measurement's precision."""
STEP_DTYPES = ("bf16", "fp16", "fp8", "fp4")
"""Row dtypes the step model prices (fp32 steps, e.g. a CPU run, inform no MFU)."""


@dataclass(frozen=True)
class TrainCase:
    """A train row as the step model sees it, and its measured step time."""

    model: ModelSpec
    gpu: GpuSpec
    job: TrainingJob
    layout: TrainingLayout
    measured_step_s: float
    credited_flops_per_step: float

    @property
    def key(self) -> str:
        return mfu_key(gpu=self.gpu, job=self.job)

    def step_s(self, cal: TrainingCalibration) -> float:
        return predict_step(self.model, self.gpu, self.job, self.layout, cal).step_time_s


def train_case(row: ResultRow, catalog: Catalog) -> TrainCase | None:
    """The row as a step-model case; None when it cannot say (no catalog GPU, model, batch or seq_len)."""
    fields = row.fields
    dtype = fields.get("dtype", "bf16")
    if row.kind != "train" or row.metric != "tflops" or dtype not in STEP_DTYPES:
        return None
    try:
        gpu = catalog.get_gpu(row.gpu)
        batch, seq_len = int(fields["batch_size"]), int(fields["seq_len"])
        method = fields.get("method", "full")
        model = model_for_seq_len(get_model(fields["model"]), seq_len)
        job = TrainingJob.model_validate(
            {
                "method": resolve_method(method),
                "dtype": dtype,
                "seq_len": seq_len,
                "global_batch": batch,
                "lora_rank": int(fields.get("lora_rank") or DEFAULT_LORA_RANK),
            }
        )
        layout = TrainingLayout.model_validate(
            {"micro_batch": batch, "checkpointing": fields.get("checkpointing") or "none"}
        )
        check_layout(model, job, layout)
        credited = credited_flops_per_token(model, seq_len=seq_len, method=method) * batch * seq_len
    except (KeyError, ValueError, GpuplanError):  # pydantic's ValidationError is a ValueError
        return None
    return TrainCase(
        model=model,
        gpu=gpu,
        job=job,
        layout=layout,
        measured_step_s=credited / (row.value * TFLOPS),
        credited_flops_per_step=credited,
    )


def predict_train_tflops(row: ResultRow, catalog: Catalog, cal: TrainingCalibration) -> float | None:
    """The row's credited TFLOP/s under ``cal`` (the step model's step time), None when it cannot say."""
    case = train_case(row, catalog)
    if case is None:
        return None
    return case.credited_flops_per_step / case.step_s(cal) / TFLOPS


def _with_mfu(cal: TrainingCalibration, key: str, value: float) -> TrainingCalibration:
    return cal.model_copy(update={"mfu": cal.mfu | {key: value}})


def solve_mfu(case: TrainCase, cal: TrainingCalibration) -> float:
    """The MFU of the case's key that makes its predicted step time its measured one (clamped to
    ``MFU_RANGE`` when no MFU in it does)."""
    lo, hi = (math.log(v) for v in MFU_RANGE)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if case.step_s(_with_mfu(cal, case.key, math.exp(mid))) > case.measured_step_s:
            lo = mid  # still too slow: a higher MFU is needed
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def fit_train_mfu(
    rows: Sequence[ResultRow], catalog: Catalog, start: TrainingCalibration
) -> dict[str, float]:
    """``family:dtype`` → the geometric median over its rows of the MFU each row solves for."""
    solved: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        case = train_case(row, catalog)
        if case is not None:
            solved[case.key].append(solve_mfu(case, start))
    return {key: math.exp(statistics.median(math.log(v) for v in values)) for key, values in solved.items()}

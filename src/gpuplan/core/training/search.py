"""Layout search: enumerate TP × PP × CP × EP × ZeRO × micro-batch × checkpointing × pipeline schedule
(plain 1F1B or interleaved, :func:`~gpuplan.core.training.spec.interleaved_chunks`) for a GPU count,
keep what fits in memory, rank by step time, and say why the rest were rejected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.memory import usable_memory_bytes
from gpuplan.core.training.memory import TrainingMemory, training_memory
from gpuplan.core.training.spec import (
    Checkpointing,
    TrainingJob,
    TrainingLayout,
    check_layout,
    interleaved_chunks,
    micro_batches_per_step,
)
from gpuplan.core.training.step import StepPrediction, predict_step
from gpuplan.core.units import GIB

MICRO_BATCHES = (1, 2, 4, 8, 16)
CHECKPOINTING: tuple[Checkpointing, ...] = ("none", "full")
MAX_TP = 8
"""TP stays inside one NVLink domain in practice (Narayanan et al. 2021 §3.3)."""


@dataclass(frozen=True)
class Candidate:
    """A layout that fits, with its memory and step prediction."""

    layout: TrainingLayout
    memory: TrainingMemory
    step: StepPrediction


@dataclass(frozen=True)
class SearchResult:
    """Fitting candidates (fastest first) and the reason each rejected layout failed."""

    candidates: tuple[Candidate, ...]
    rejected: tuple[tuple[str, str], ...]


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _layouts(model: ModelSpec, job: TrainingJob, num_gpus: int, zero_stage: int) -> Iterator[TrainingLayout]:
    experts = model.moe.num_experts if model.moe else 1
    for tp in _divisors(num_gpus, MAX_TP):
        for pp in _divisors(num_gpus // tp, model.num_layers):
            dp = num_gpus // (tp * pp)
            schedules = sorted({1, interleaved_chunks(model, pp)})
            for ep in [e for e in _divisors(dp, experts) if experts % e == 0] if experts > 1 else [1]:
                for mb, ckpt, v in product(MICRO_BATCHES, CHECKPOINTING, schedules):
                    yield TrainingLayout(
                        tp=tp,
                        pp=pp,
                        dp=dp,
                        ep=ep,
                        zero_stage=zero_stage,
                        micro_batch=mb,
                        checkpointing=ckpt,
                        virtual_stages=v,
                    )


def search_layouts(
    model: ModelSpec,
    gpu: GpuSpec,
    job: TrainingJob,
    num_gpus: int,
    cal: TrainingCalibration,
    *,
    zero_stages: tuple[int, ...] = (1, 3),
) -> SearchResult:
    """Every layout of ``num_gpus`` GPUs that runs ``job``; the fastest first."""
    usable = usable_memory_bytes(gpu)
    fits: list[Candidate] = []
    rejected: list[tuple[str, str]] = []
    stages = (0,) if num_gpus == 1 else ((0, 3) if job.is_adapter else zero_stages)
    for stage in stages:
        for layout in _layouts(model, job, num_gpus, stage):
            try:
                check_layout(model, job, layout)
            except GpuplanError as exc:
                rejected.append((layout.label(), exc.message))
                continue
            m = micro_batches_per_step(job, layout)
            memory = training_memory(model, job, layout, micro_batches=m)
            if memory.total_bytes > usable:
                rejected.append(
                    (layout.label(), f"needs {memory.total_bytes / GIB:.1f} GiB > {usable / GIB:.1f} GiB")
                )
                continue
            fits.append(Candidate(layout, memory, predict_step(model, gpu, job, layout, cal)))
    fits.sort(key=lambda c: c.step.step_time_s)
    return SearchResult(candidates=tuple(fits), rejected=tuple(rejected))

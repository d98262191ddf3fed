"""Predict rows of training.csv and the training rows of memory.csv (training planner).

The inference ``cal`` argument is not used: training has its own factors
(``gpuplan/data/calibration/training_calibration.yaml``); :func:`predict_training_with` takes them
explicitly so that the fit can vary them.
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.perf.memory import usable_memory_bytes
from gpuplan.core.training.memory import TrainingMemory, training_memory
from gpuplan.core.training.spec import TrainingJob, TrainingLayout, check_layout, micro_batches_per_step
from gpuplan.core.training.step import predict_step
from gpuplan.core.units import GB, GIB
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.memory_rows import memory_options, memory_row
from gpuplan.usecases.validation.training_rows import MEMORY_METRICS, row_model, training_layout, training_row

THROUGHPUT_METRICS = frozenset(
    {"tokens_per_s_per_gpu", "tokens_per_s", "samples_per_s", "step_time_s", "tflops_per_gpu"}
)
MAX_FIT_SEQ_LEN = 1 << 20


def predict_training_case(case: Case, catalog: Catalog, cal: Calibration) -> float:
    """The predicted value of a training row's metric; Skip with the reason when it cannot be predicted."""
    return predict_training_with(case, catalog, default_training_calibration())


def predict_training_with(case: Case, catalog: Catalog, tcal: TrainingCalibration) -> float:
    if not case.get("gpu"):
        raise Skip("no GPU named")
    gpu = catalog.get_gpu(case.get("gpu"))
    if case.schema_name == "memory":
        return _memory_metric(case, gpu)
    if case.metric not in THROUGHPUT_METRICS:
        raise Skip(f"{case.metric} depends on convergence or run length, not step time")
    job, sizes, gpus = training_row(case)
    model = row_model(case, job.seq_len)
    layout = training_layout(case, model, gpu, job, sizes, gpus, tcal)
    check_layout(model, job, layout)
    step = predict_step(model, gpu, job, layout, tcal)
    values = {
        "tokens_per_s_per_gpu": step.tokens_per_s_per_gpu,
        "tokens_per_s": step.tokens_per_s,
        "samples_per_s": job.global_batch / step.step_time_s,
        "step_time_s": step.step_time_s,
        "tflops_per_gpu": step.model_tflops_per_gpu,
    }
    return values[case.metric]


def _memory(case: Case, job: TrainingJob, layout: TrainingLayout) -> TrainingMemory:
    model = row_model(case, job.seq_len)
    m = micro_batches_per_step(job, layout)
    return training_memory(model, job, layout, micro_batches=m, options=memory_options(case))


def _peak_bytes(case: Case, job: TrainingJob, layout: TrainingLayout) -> float:
    return _memory(case, job, layout).total_bytes


def _counted_peak_bytes(case: Case, job: TrainingJob, layout: TrainingLayout, gpu: GpuSpec) -> float:
    """The peak a reading can show: the caching allocator gives its cache back and retries before it
    fails an allocation (https://pytorch.org/docs/stable/notes/cuda.html#memory-management), so the
    reserve never lifts the count past the device's memory."""
    memory = _memory(case, job, layout)
    return min(memory.total_bytes, max(memory.total_bytes - memory.reserve_bytes, usable_memory_bytes(gpu)))


def _budget_bytes(case: Case, gpu: GpuSpec) -> float:
    budget = case.note("vram_budget_gb")
    return float(budget) * GB if budget else usable_memory_bytes(gpu)


def _max_seq_fit(case: Case, job: TrainingJob, layout: TrainingLayout, budget: float) -> float:
    lo, hi = 0, MAX_FIT_SEQ_LEN
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _peak_bytes(case, job.model_copy(update={"seq_len": mid}), layout) <= budget:
            lo = mid
        else:
            hi = mid
    return float(lo)


def _memory_metric(case: Case, gpu: GpuSpec) -> float:
    if case.metric not in MEMORY_METRICS:
        raise Skip(f"memory metric {case.metric} is not predicted")
    job, layout = memory_row(case)
    budget = _budget_bytes(case, gpu)
    if case.metric == "max_seq_len_fit":
        return _max_seq_fit(case, job, layout, budget)
    if not case.int_field("seq_len"):
        raise Skip("seq_len not stated")
    peak = _counted_peak_bytes(case, job, layout, gpu)
    if case.metric == "fits":
        return 1.0 if peak <= budget else 0.0
    scale = layout.num_gpus if case.metric == "peak_gib_total" else 1
    return peak * scale / GIB

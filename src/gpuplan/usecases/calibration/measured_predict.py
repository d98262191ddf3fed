"""What the model predicts for one result row under a calibration (None: it cannot say).

* gemm (16-bit or fp8/int8/fp4): ``dense peak · compute_efficiency[family] (· low_precision_scale)``;
  fp32/tf32 GEMMs inform no factor and are left out;
* bandwidth (device copy): ``memory bandwidth · bandwidth_efficiency[family]``;
* allreduce (bus bandwidth): ``one-direction link bandwidth · link_efficiency``;
* train (bench train's credited TFLOP/s): the training step model on the row's job
  (``measured_train.predict_train_tflops``);
* serve: the validation predict path (``validation/predict.py``), as for published rows.
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.perf.peaks import power_cap, tp_link
from gpuplan.usecases.calibration.measured_rows import ResultRow
from gpuplan.usecases.calibration.measured_train import predict_train_tflops
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.predict import predict_case

LOW_PRECISION = ("fp8", "int8", "fp4")
SIXTEEN_BIT = ("bf16", "fp16")


def gpu_of(row: ResultRow, catalog: Catalog) -> GpuSpec | None:
    try:
        return catalog.get_gpu(row.gpu)
    except GpuplanError:
        return None


def peak_tflops(gpu: GpuSpec, dtype: str, power_exponent: float) -> float | None:
    """The peak the performance model multiplies its efficiency by: the datasheet peak, times the
    power cap of a PCIe/NVL board (``roofline.power_cap``). A
    measurement on a capped board already carries the cap, so efficiencies fitted against this
    peak are not charged it twice."""
    value = gpu.tflops(dtype)
    return value * power_cap(gpu, power_exponent) if value else None


def as_case(row: ResultRow) -> Case:
    fields = dict(row.fields) | {"id": row.id, "gpu": row.gpu, "metric": row.metric, "value": str(row.value)}
    return Case(
        schema_name="inference", id=row.id, metric=row.metric, value=row.value, quality="A", fields=fields
    )


def _micro(row: ResultRow, gpu: GpuSpec, cal: Calibration) -> float | None:
    dtype = row.fields.get("dtype", "")
    if row.kind == "gemm":
        peak = peak_tflops(gpu, dtype, cal.power_limit_exponent)
        if peak is None or dtype not in SIXTEEN_BIT + LOW_PRECISION:
            return None
        scale = cal.low_precision_compute_scale if dtype in LOW_PRECISION else 1.0
        return peak * cal.compute(gpu.family) * scale
    if row.kind == "bandwidth":
        return gpu.memory_bandwidth_bytes_per_s / 1e9 * cal.bandwidth(gpu.family)
    ranks = int(row.fields.get("ranks") or 2)
    return tp_link(gpu, ranks)[1] / 1e9 * cal.link_efficiency


def predict_row(
    row: ResultRow, catalog: Catalog, cal: Calibration, training: TrainingCalibration
) -> float | None:
    gpu = gpu_of(row, catalog)
    if gpu is None:
        return None
    if row.kind == "serve":
        return predict_case(as_case(row), catalog, cal, simulate=False).predicted
    if row.kind == "train":
        return predict_train_tflops(row, catalog, training)
    return _micro(row, gpu, cal)


def unpredicted_reason(row: ResultRow, catalog: Catalog, cal: Calibration) -> str:
    """Why :func:`predict_row` gives None for ``row``, in one line."""
    if gpu_of(row, catalog) is None:
        return f"GPU {row.gpu!r} is not in the catalog"
    if row.kind == "serve":
        reason = predict_case(as_case(row), catalog, cal, simulate=False).skip_reason
        return reason or "the serving model gave no prediction"
    shown = ", ".join(f"{k}={v}" for k, v in row.fields.items() if k != "source")
    return f"no {row.kind} prediction for these conditions ({shown})"

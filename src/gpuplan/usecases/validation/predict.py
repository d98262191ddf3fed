"""Predict one validation row with the core models, or say why it is skipped.

Row conditions map onto a :class:`Layout` and a :class:`Workload`; blank ``tp`` means the
source did not give the layout, so the tool chooses it (the highest-throughput TP that fits).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import InferencePrediction, predict_inference
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import inference_memory
from gpuplan.core.units import GIB, MS_PER_S
from gpuplan.core.workload import LOAD_OF_KIND, Workload
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.datasets import row_lengths
from gpuplan.usecases.validation.layouts import row_dtype, row_engine, row_layouts
from gpuplan.usecases.validation.predict_decode import is_decode_instance_row, predict_decode_case
from gpuplan.usecases.validation.predict_server import (
    LATENCY_METRIC,
    is_llmperf_itl,
    predict_closed_loop_case,
    predict_offline_dataset_case,
    predict_server_case,
)
from gpuplan.usecases.validation.predict_sweep import finite_prompts, predict_sweep_case, sweep_utilisation
from gpuplan.usecases.validation.predict_training import predict_training_case
from gpuplan.usecases.validation.regimes import Regime, load_regime, scenario_regime


class RowResult(FrozenModel):
    """The contract row of ``gpuplan validate --format json``."""

    id: str
    metric: str
    quality: str
    gpu: str
    measured: float
    predicted: float | None
    ape: float | None
    skip_reason: str | None
    regime: Regime = "other"
    """The load regime the row was measured in (``usecases/validation/regimes.py``)."""


def predict_case(case: Case, catalog: Catalog, cal: Calibration, *, simulate: bool = True) -> RowResult:
    """Predict one row; never raises for a data problem (it becomes a skip reason).

    ``simulate=False`` prices ``concurrency`` rows with the analytic closed-loop model instead of the
    simulator's closed loop, and MLPerf ``offline`` rows with the analytic model at their dataset's
    mean lengths instead of the simulated saturation on its length distribution: the calibration fits
    use it (fast, and free of the sampling noise a finite-difference Jacobian would see); validation
    reports the simulator."""
    try:
        predicted = _dispatch(case, catalog, cal, simulate)
    except Skip as why:
        return row_result(case, None, str(why))
    except GpuplanError as exc:
        return row_result(case, None, exc.one_line())
    except ValidationError as exc:  # the row's conditions break a rule (tp=-2, …): the row, not the run
        return row_result(case, None, f"row conditions invalid: {describe_validation_error(exc)}")
    regime = _regime(case, catalog, cal) if simulate else scenario_regime(case) or "other"
    return row_result(case, predicted, None).model_copy(update={"regime": regime})


def _regime(case: Case, catalog: Catalog, cal: Calibration) -> Regime:
    """The row's regime: by its scenario, else by the predicted utilisation of its finite run."""
    fixed = scenario_regime(case)
    if fixed is not None or case.schema_name != "inference":
        return fixed or "other"
    if finite_prompts(case) is None or case.get("scenario") not in ("concurrency", "rate"):
        return "other"
    model, gpu = get_model(case.get("model")), catalog.get_gpu(case.get("gpu"))
    return load_regime(sweep_utilisation(case, model, gpu, cal))


def row_result(case: Case, predicted: float | None, skip: str | None) -> RowResult:
    """The contract row of one case: its prediction (or why not) and its APE."""
    ape = abs(predicted / case.value - 1.0) if predicted is not None and case.value > 0 else None
    return RowResult(
        id=case.id,
        metric=case.metric,
        quality=case.quality,
        gpu=case.get("gpu"),
        measured=case.value,
        predicted=predicted,
        ape=ape,
        skip_reason=skip if predicted is None else None,
    )


def _dispatch(case: Case, catalog: Catalog, cal: Calibration, simulate: bool) -> float:
    if case.schema_name == "training" or (case.schema_name == "memory" and case.get("method") != "inference"):
        return predict_training_case(case, catalog, cal)
    if not case.get("gpu"):
        raise Skip("no GPU named")
    model = get_model(case.get("model"))
    gpu = catalog.get_gpu(case.get("gpu"))
    if case.schema_name == "inference_memory":
        return _memory_metric(case, model, gpu)
    return _inference_metric(case, model, gpu, cal, simulate)


# --- inference.csv -------------------------------------------------------------------------------

_INFERENCE_METRICS: dict[str, Callable[[InferencePrediction], float]] = {
    "output_tokens_per_s": lambda p: p.output_tokens_per_s,
    "output_tokens_per_s_per_gpu": lambda p: p.output_tokens_per_s_per_gpu,
    "requests_per_s": lambda p: p.requests_per_s,
    "ttft_ms_mean": lambda p: p.ttft_s * MS_PER_S,
    "ttft_ms_p50": lambda p: p.ttft_s * MS_PER_S,
    "tpot_ms_mean": lambda p: p.tpot_s * MS_PER_S,
    "tpot_ms_p50": lambda p: p.tpot_s * MS_PER_S,
    "e2e_ms_mean": lambda p: p.e2e_s * MS_PER_S,
}


def _inference_metric(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration, simulate: bool) -> float:
    scenario = case.get("scenario")
    if is_decode_instance_row(case):  # a disaggregated deployment's decode instance: decode only
        return predict_decode_case(case, model, gpu, cal)
    simulated = _simulated_metric(case, model, gpu, cal, simulate)
    if simulated is not None:
        return simulated
    if case.metric not in _INFERENCE_METRICS:
        if LATENCY_METRIC.match(case.metric):  # a latency statistic the analytic means do not give
            raise Skip(f"metric {case.metric} needs percentiles from the serving simulator")
        known = ", ".join(sorted(_INFERENCE_METRICS))
        raise Skip(f"metric {case.metric!r} is not one gpuplan predicts (known: {known})")
    if scenario == "single" and not case.int_field("input_len") and case.int_field("output_len"):
        inp, output = 0, case.int_field("output_len") or 0  # decode-speed test: no prompt stated
    else:
        inp, output = row_lengths(case)
    loads = {"concurrency": case.int_field("concurrency"), "batch_size": case.int_field("batch_size")}
    load = LOAD_OF_KIND.get(scenario)  # the kind's column; the others are checked as numbers, not read
    workload = Workload(
        scenario=scenario,
        input_tokens=inp,
        output_tokens=output,
        **({load: loads[load]} if load in loads else {}),
    )
    llmperf_itl = is_llmperf_itl(case)  # llmperf's ITL is E2E / tokens
    metric = _INFERENCE_METRICS["e2e_ms_mean" if llmperf_itl else case.metric]
    per_token = 1.0 / output if llmperf_itl else 1.0
    best: float | None = None
    for layout in row_layouts(case, model):
        try:
            value = metric(predict_inference(model, gpu, layout, workload, cal=cal)) * per_token
        except GpuplanError:
            continue
        if best is None or _better(case.metric, value, best):
            best = value
    if best is None:
        raise Skip(f"no layout of {model.id} fits on {case.get('num_gpus')}x{gpu.id}")
    return best


def _simulated_metric(
    case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration, simulate: bool
) -> float | None:
    """Rows the serving simulator prices (None: the analytic model does): server/rate rows always;
    closed loops and dataset-length offline rows when ``simulate`` (calibration fits use the analytic
    model for those: fast, and free of sampling noise)."""
    scenario = case.get("scenario")
    if simulate and scenario in ("concurrency", "rate") and finite_prompts(case) is not None:
        return predict_sweep_case(case, model, gpu, cal)
    if scenario in ("server", "rate"):
        return predict_server_case(case, model, gpu, cal)
    if not simulate:
        return None
    if scenario == "concurrency":
        return predict_closed_loop_case(case, model, gpu, cal)
    if scenario == "offline":
        return predict_offline_dataset_case(case, model, gpu, cal)
    return None


def _better(metric: str, value: float, best: float) -> bool:
    """For a source-chosen layout: highest throughput, lowest latency."""
    return value > best if "per_s" in metric else value < best


# --- inference_memory.csv ------------------------------------------------------------------------


def _engine_version(case: Case) -> str | None:
    """The row's engine version, or the V0/V1 generation its notes name."""
    if case.get("framework_version"):
        return case.get("framework_version")
    reported = case.get("notes")
    for generation in ("V0", "V1"):
        if f"({generation}" in reported or f"{generation} engine" in reported:
            return generation.lower()
    return None


def _expert_parallel(case: Case, tp: int) -> int:
    """EP degree from a ``layout:`` note (vLLM -dp N with expert parallelism spreads experts over N GPUs)."""
    notes = case.get("notes")
    if "layout:" not in notes or ("ep=" not in notes and "expert parallelism" not in notes):
        return 1
    if "ep=" in notes:
        digits = notes.split("ep=", 1)[1].split(" ")[0].strip(",;")
        return int(digits) if digits.isdigit() else 1
    return tp


def _memory_metric(case: Case, model: ModelSpec, gpu: GpuSpec) -> float:
    tp = case.int_field("tp") or case.int_field("num_gpus") or 1
    layout = Layout(
        tp=tp,
        pp=case.int_field("pp") or 1,
        ep=_expert_parallel(case, tp),
        weight_dtype=row_dtype(case.get("weight_dtype")),
        kv_dtype=case.get("kv_dtype") or None,
        engine=row_engine(case),
        engine_version=_engine_version(case),
        gpu_memory_utilization=case.float_field("gpu_memory_utilization"),
    )
    max_len = case.int_field("max_model_len")
    mem = inference_memory(model, gpu, layout, max_model_len=max_len)
    block = case.int_field("block_size") or 16
    metrics: dict[str, float] = {
        "weights_gib_per_gpu": mem.weights_bytes / GIB,
        "kv_cache_gib_per_gpu": mem.kv_pool_bytes / GIB,
        "kv_cache_tokens": float(mem.kv_tokens),
        "max_total_tokens": float(mem.kv_tokens),
        "kv_cache_blocks": mem.kv_tokens / block,
        "activation_peak_gib": mem.activation_bytes / GIB,
        "non_torch_gib": mem.overhead_bytes / GIB,
        "fits": 1.0 if mem.fits else 0.0,
    }
    if case.metric == "max_concurrency_at_len":
        if not max_len:
            raise Skip("max_model_len not stated")
        return mem.max_concurrency
    if case.metric not in metrics:
        raise Skip(f"metric {case.metric} is not modelled (CUDA-graph capture delta)")
    return metrics[case.metric]

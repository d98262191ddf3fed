"""``gpuplan fit``: does one deployment fit, and how much KV cache is left for requests.

From ``fit``'s flags (:func:`fit`) or an inference scenario document (:func:`fit_from_scenario`):
one checked layout, one :func:`gpuplan.core.perf.memory.inference_memory` call. No rendering here.
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.uncertainty import Bounds, Uncertainty, bounds
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import UserInputError, check_whole_number
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT, MAX_PARALLEL_DEGREE, GpuSpec
from gpuplan.core.model.spec import MAX_POSITIONS, ModelSpec
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.perf.memory import InferenceMemory, inference_memory

GROWN_GPU_COUNTS = (2, 4, 8, 16, 32, 64)
"""GPU counts per replica tried for a deployment that does not fit (TP inside a server, then PP)."""
SMALLER_WEIGHT_DTYPES = ("fp8", "int8", "int4")
"""Weight formats tried, smallest last, when the deployment does not fit at its own."""
CONTEXT_STEP_TOKENS = 1024
"""A suggested ``--context`` is rounded down to a multiple of this."""
MEMORY_METRICS = {
    "weights_bytes": "weights_gib_per_gpu",
    "activation_bytes": "activation_peak_gib",
    "overhead_bytes": "non_torch_gib",
    "kv_pool_bytes": "kv_cache_gib_per_gpu",
    "kv_tokens": "kv_cache_tokens",
    "max_concurrency": "max_concurrency_at_len",
}
"""``InferenceMemory`` fields with an interval and the ``inference_memory.csv`` metric whose held-out
residuals bound it (``usecases/validation/predict.py`` predicts those metrics from the same fields)."""


class FitResult(FrozenModel):
    """``gpuplan fit``: the memory breakdown on one GPU of the replica, and what it holds; when it
    does not fit, ``nearest``: the flags of the nearest deployments that do (more GPUs, smaller
    weights, a shorter context)."""

    model: str
    gpu: str
    layout: Layout
    memory: InferenceMemory
    nearest: tuple[str, ...] = ()
    interval: Bounds | None = None
    """The error model's intervals on ``memory``'s fields (same names and units; docs/json.md)."""


def memory_bounds(mem: InferenceMemory, engine: str, uncertainty: Uncertainty) -> Bounds:
    """The intervals of the breakdown: the inference-memory group of each metric (no memory factor is
    fitted, so the GPU's evidence does not apply); no part of one GPU's memory exceeds its usable memory."""
    figures = {
        name: (
            float(getattr(mem, name)),
            group_path(
                family="inference memory", regime="other", gpu_fitted=None, engine_known=engine != "other",
                metric=metric,
            ),
        )
        for name, metric in MEMORY_METRICS.items()
    }  # fmt: skip
    b = bounds(uncertainty=uncertainty, figures=figures)
    capped = {
        k: min(v, mem.usable_bytes) if v is not None and k.endswith("_bytes") else v
        for k, v in b.high.items()
    }
    return b.model_copy(update={"high": capped})


def fit(
    model_id: str,
    gpu_id: str,
    catalog: Catalog,
    *,
    count: int,
    tp: int | None,
    pp: int,
    weight_dtype: str,
    kv_dtype: str | None,
    engine: str,
    context_tokens: int | None,
    utilization: float | None,
    spec: ModelSpec | None = None,
    uncertainty: Uncertainty | None = None,
) -> FitResult:
    """Does it fit, how much KV is left (``spec``: a config.json for ``model_id``; ``uncertainty``: intervals)."""
    for flag, value, most in (
        ("--tp", tp, MAX_PARALLEL_DEGREE),
        ("--pp", pp, MAX_PARALLEL_DEGREE),
        ("--count", count, MAX_GPU_COUNT),
        ("--context", context_tokens, MAX_POSITIONS),
    ):
        check_whole_number(flag, value, maximum=most)
    if tp is None and count // max(pp, 1) > MAX_PARALLEL_DEGREE:
        raise UserInputError(
            f"--count {count} with no --tp makes tp={count // max(pp, 1)}, more than {MAX_PARALLEL_DEGREE} ranks",
            hint="pass --tp (e.g. --tp 8): the other GPUs become replicas",
        )
    if utilization is not None and not 0 < utilization <= 1:
        raise UserInputError(
            f"--utilization must be in (0, 1], got {utilization}", hint="e.g. --utilization 0.9"
        )
    model, gpu = spec or get_model(model_id), catalog.get_gpu(gpu_id)
    sc_tp, replicas = split_gpus(count, tp, pp, field="--count")
    layout = Layout(
        tp=sc_tp,
        pp=pp,
        replicas=replicas,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        engine=engine,
        gpu_memory_utilization=utilization,
    )
    check_layout(model, gpu, layout)
    mem = inference_memory(model, gpu, layout, max_model_len=context_tokens)
    return _result(
        model, gpu, layout, mem, None if uncertainty is None else memory_bounds(mem, engine, uncertainty)
    )


def _result(
    model: ModelSpec, gpu: GpuSpec, layout: Layout, mem: InferenceMemory, b: Bounds | None
) -> FitResult:
    """The answer, with the nearest deployments that fit when this one does not."""
    nearest = () if mem.fits else nearest_fits(model, gpu, layout, mem)
    return FitResult(model=model.id, gpu=gpu.id, layout=layout, memory=mem, nearest=nearest, interval=b)


def nearest_fits(model: ModelSpec, gpu: GpuSpec, layout: Layout, mem: InferenceMemory) -> tuple[str, ...]:
    """The flags of the nearest deployments that fit, at the same context: the fewest GPUs per replica,
    the largest smaller weight format, and the longest context that does (each only when one does)."""
    hints = [_more_gpus(model, gpu, layout, mem.max_model_len), _smaller_weights(model, gpu, layout, mem)]
    tokens = _context_that_fits(mem)
    hints.append(f"--context {tokens}" if tokens else None)
    return tuple(h for h in hints if h)


def _fits(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: int) -> bool:
    try:
        check_layout(model, gpu, layout)
    except UserInputError:
        return False
    return inference_memory(model, gpu, layout, max_model_len=context_tokens).fits


def _more_gpus(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: int) -> str | None:
    for count in (n for n in GROWN_GPU_COUNTS if n > layout.gpus_per_replica):
        tp = min(count, gpu.interconnect.node_gpus)
        grown = layout.model_copy(update={"tp": tp, "pp": count // tp, "replicas": 1})
        if _fits(model, gpu, grown, context_tokens):
            return f"--count {count} --tp {tp}" + (f" --pp {count // tp}" if count > tp else "")
    return None


def _smaller_weights(model: ModelSpec, gpu: GpuSpec, layout: Layout, mem: InferenceMemory) -> str | None:
    for name in SMALLER_WEIGHT_DTYPES:
        dtype = get_dtype(name)
        if dtype.bytes_per_element >= layout.weight_dtype.bytes_per_element:
            continue
        smaller = layout.model_copy(update={"weight_dtype": dtype})
        if _fits(model, gpu, smaller, mem.max_model_len):
            return f"--dtype {name}"
    return None


def _context_that_fits(mem: InferenceMemory) -> int | None:
    """The longest context one request's KV fits in when the weights do, rounded down; None if none."""
    if mem.kv_pool_bytes <= 0 or mem.kv_bytes_per_token <= 0:
        return None
    tokens = int(mem.kv_pool_bytes / mem.kv_bytes_per_token) // CONTEXT_STEP_TOKENS * CONTEXT_STEP_TOKENS
    return tokens if 0 < tokens < mem.max_model_len else None


def fit_from_scenario(
    sc: ScenarioFile, catalog: Catalog, uncertainty: Uncertainty | None = None
) -> FitResult:
    """``fit --scenario``: the deployment of an inference scenario, at its context length."""
    if not sc.hardware.gpu:
        raise UserInputError(
            "hardware.gpu is required for fit", hint="e.g. hardware: {gpu: H100-SXM, count: 2}"
        )
    return fit(
        sc.model,
        sc.hardware.gpu,
        catalog,
        count=sc.hardware.count,
        tp=sc.parallelism.tp,
        pp=sc.parallelism.pp,
        weight_dtype=sc.precision.weights,
        kv_dtype=sc.precision.kv_cache,
        engine=sc.engine,
        context_tokens=sc.max_model_len or sc.workload.input_tokens + sc.workload.output_tokens,
        utilization=sc.gpu_memory_utilization,
        uncertainty=uncertainty,
    )

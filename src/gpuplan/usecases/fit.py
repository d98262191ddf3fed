"""``gpuplan fit``: does one deployment fit, and how much KV cache is left for requests.

From ``fit``'s flags (:func:`fit`) or an inference scenario document (:func:`fit_from_scenario`):
one checked layout, one :func:`gpuplan.core.perf.memory.inference_memory` call. No rendering here.
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.errors import UserInputError, check_whole_number
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT, MAX_PARALLEL_DEGREE
from gpuplan.core.model.spec import MAX_POSITIONS, ModelSpec
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.perf.memory import InferenceMemory, inference_memory


class FitResult(FrozenModel):
    """``gpuplan fit``: the memory breakdown on one GPU of the replica, and what it holds."""

    model: str
    gpu: str
    layout: Layout
    memory: InferenceMemory


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
) -> FitResult:
    """Does it fit, and how much KV is left (``spec``: a parsed config.json instead of ``model_id``)."""
    for flag, value, most in (
        ("--tp", tp, MAX_PARALLEL_DEGREE),
        ("--pp", pp, MAX_PARALLEL_DEGREE),
        ("--count", count, MAX_GPU_COUNT),
        ("--context", context_tokens, MAX_POSITIONS),
    ):
        check_whole_number(flag, value, maximum=most)
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
    return FitResult(model=model.id, gpu=gpu.id, layout=layout, memory=mem)


def fit_from_scenario(sc: ScenarioFile, catalog: Catalog) -> FitResult:
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
    )

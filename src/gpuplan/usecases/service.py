"""Use cases shared by the CLI and the web app: resolve ids against the catalog and model registry,
build one validated request, make one core call. No rendering here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import (
    DeploymentDocument,
    ScenarioFile,
    describe_validation_error,
)
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.cost import usd_per_million_tokens
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import (
    InferencePrediction,
    InferenceWorkload,
    check_context_window,
    check_generative,
    predict_inference,
)
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.perf.memory import InferenceMemory, inference_memory
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.request import GpuOffer, Recommendation, SearchSpace, ServingTarget, Sla
from gpuplan.core.sim.simulator import Progress
from gpuplan.data.calibration import default_calibration


def offers(
    catalog: Catalog,
    gpu_ids: Sequence[str] | None,
    *,
    price_kind: str = "on_demand",
    usd_per_gpu_hour: float | None = None,
) -> list[GpuOffer]:
    """GPU offers with prices; ``usd_per_gpu_hour`` overrides the catalog (only with one GPU)."""
    ids = list(gpu_ids) if gpu_ids else catalog.gpu_ids()
    if usd_per_gpu_hour is not None and len(ids) != 1:
        raise UserInputError("a price override needs exactly one GPU", hint="pass --gpus with one id")
    result = []
    for gid in ids:
        gpu = catalog.get_gpu(gid)
        price = catalog.price(gpu.id, price_kind)
        purchase = catalog.price(gpu.id, "purchase")
        result.append(
            GpuOffer(
                gpu=gpu,
                usd_per_gpu_hour=usd_per_gpu_hour or (price.usd if price else None),
                price_source="user override"
                if usd_per_gpu_hour
                else (f"{price.provider} {price.as_of} {price.source_url}" if price else ""),
                price_kind=price_kind,
                purchase_usd=purchase.usd if purchase else None,
            )
        )
    return result


def scenario_sla(sc: ScenarioFile) -> Sla:
    """The scenario's latency limits as the planner takes them (P99 limits make it simulate)."""
    return Sla.model_validate(sc.sla.model_dump())


def _check_generation(model: ModelSpec, sc: ScenarioFile) -> None:
    """The model generates, and prompt + answer fit its window unless ``max_model_len`` says otherwise."""
    check_generative(model)
    if sc.max_model_len is None:
        check_context_window(model, sc.workload.input_tokens + sc.workload.output_tokens)


def recommend_from_scenario(
    sc: ScenarioFile,
    catalog: Catalog,
    cal: Calibration | None = None,
    *,
    spec: ModelSpec | None = None,
    progress: Progress | None = None,
) -> Recommendation:
    """``recommend`` on a scenario document; ``spec`` (a parsed config.json) replaces the lookup of ``sc.model``."""
    model = spec or get_model(sc.model)
    _check_generation(model, sc)
    target = ServingTarget(
        input_tokens=sc.workload.input_tokens,
        output_tokens=sc.workload.output_tokens,
        rate_rps=sc.workload.rate_rps,
        concurrency=sc.workload.concurrency,
    )
    for dtype in sc.precision.allowed or ():
        get_dtype(dtype)
    space = SearchSpace(
        weight_dtypes=tuple(sc.precision.allowed or ("bf16", "fp8", "int4")),
        max_gpus=sc.hardware.max_gpus,
        engine=sc.engine,
        max_usd_per_hour=sc.prices.max_usd_per_hour,
    )
    gpus = sc.hardware.gpus or ([sc.hardware.gpu] if sc.hardware.gpu else None)
    return recommend(
        model,
        offers(catalog, gpus, price_kind=sc.prices.kind, usd_per_gpu_hour=sc.prices.usd_per_gpu_hour),
        target,
        sla=scenario_sla(sc),
        space=space,
        objective=sc.objective,
        cal=cal or default_calibration(),
        ownership=sc.ownership,
        progress=progress,
    )


class PredictResult(FrozenModel):
    """``gpuplan predict`` output."""

    model: str
    gpu: str
    layout: Layout
    workload: InferenceWorkload
    prediction: InferencePrediction
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None


def deployment_layout(sc: DeploymentDocument, model: ModelSpec, gpu: GpuSpec) -> Layout:
    """The layout a scenario's hardware / parallelism / precision sections describe, checked."""
    tp, replicas = split_gpus(sc.hardware.count, sc.parallelism.tp, sc.parallelism.pp, field="hardware.count")
    layout = Layout(
        tp=tp,
        pp=sc.parallelism.pp,
        ep=sc.parallelism.ep,
        replicas=replicas,
        weight_dtype=sc.precision.weights,
        kv_dtype=sc.precision.kv_cache,
        engine=sc.engine,
        gpu_memory_utilization=sc.gpu_memory_utilization,
    )
    check_layout(model, gpu, layout)
    return layout


def deployment_gpu(sc: DeploymentDocument, catalog: Catalog) -> GpuSpec:
    """The scenario's one GPU type (``hardware.gpu``), required by predict, fit and simulate."""
    if not sc.hardware.gpu:
        raise UserInputError(
            "hardware.gpu is required for this command", hint="e.g. hardware: {gpu: H100-SXM, count: 2}"
        )
    return catalog.get_gpu(sc.hardware.gpu)


def predict_from_scenario(
    sc: ScenarioFile, catalog: Catalog, cal: Calibration | None = None, *, spec: ModelSpec | None = None
) -> PredictResult:
    """``predict``: latency and throughput of one deployment on one workload (``spec``: as in recommend)."""
    model, gpu = spec or get_model(sc.model), deployment_gpu(sc, catalog)
    layout = deployment_layout(sc, model, gpu)
    workload = InferenceWorkload(
        scenario=sc.workload.scenario,
        input_tokens=sc.workload.input_tokens,
        output_tokens=sc.workload.output_tokens,
        concurrency=sc.workload.concurrency,
        batch_size=sc.workload.batch_size,
        rate_rps=sc.workload.rate_rps,
    )
    if workload.scenario == "rate" and workload.rate_rps is None:
        raise UserInputError("workload.scenario 'rate' needs workload.rate_rps", hint="e.g. rate_rps: 5")
    _check_generation(model, sc)
    prediction = predict_inference(model, gpu, layout, workload, cal=cal, max_model_len=sc.max_model_len)
    price = sc.prices.usd_per_gpu_hour or (p.usd if (p := catalog.price(gpu.id, sc.prices.kind)) else None)
    per_hour = price * layout.num_gpus if price else None
    per_m = (
        usd_per_million_tokens(usd_per_hour=per_hour, tokens_per_s=prediction.output_tokens_per_s)
        if per_hour
        else None
    )
    return PredictResult(
        model=model.id,
        gpu=gpu.id,
        layout=layout,
        workload=workload,
        prediction=prediction,
        usd_per_hour=per_hour,
        usd_per_million_output_tokens=per_m,
    )


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
    for flag, value in (("--tp", tp), ("--pp", pp), ("--count", count), ("--context", context_tokens)):
        if value is not None and value < 1:
            raise UserInputError(f"{flag} must be a whole number >= 1, got {value}", hint=f"e.g. {flag} 1")
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


def scenario_from_mapping(doc: dict[str, Any]) -> ScenarioFile:
    """A scenario built from CLI flags or an API body; None values mean 'not given'."""
    cleaned = _drop_none(doc)
    try:
        return ScenarioFile.model_validate(cleaned)
    except ValidationError as exc:
        raise UserInputError(describe_validation_error(exc)) from None


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value

"""``gpuplan predict``: latency, throughput and cost of one deployment on one workload.

Resolves the scenario's model, GPU and layout (:mod:`gpuplan.usecases.resolve`), makes one
:func:`gpuplan.core.perf.inference.predict_inference` call and prices the answer. No rendering here.
"""

from __future__ import annotations

from pydantic import Field

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import Bounds, Uncertainty, bounds, load_regime
from gpuplan.core.cost import usd_per_million_tokens
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import InferencePrediction, predict_inference
from gpuplan.core.perf.layout import Layout
from gpuplan.core.pricing import PriceBasis, PriceQuote, typed_quote
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.pricing import scenario_price_basis
from gpuplan.usecases.resolve import check_generation, deployment_gpu, deployment_layout, prefix_hit_rate


class PredictResult(FrozenModel):
    """``gpuplan predict`` output."""

    model: str
    gpu: str
    layout: Layout
    workload: Workload
    prediction: InferencePrediction
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    price_basis: PriceBasis | None = None
    price_quote: PriceQuote | None = Field(
        default=None, description="the quote usd_per_hour comes from; null when the basis gives the GPU none"
    )
    interval: Bounds | None = Field(
        default=None,
        description="the error model's intervals on ttft_s, tpot_s and output_tokens_per_s (docs/json.md)",
    )


FIXED_REGIMES = {"single": "single", "offline": "saturated", "static_batch": "saturated"}
"""The error model's regime of a workload kind that fixes it (``usecases/validation/regimes.py``); the
others (``rate``, ``concurrency``) go by their utilisation."""
INTERVAL_FIGURES = (
    ("ttft_s", "ttft", "ttft_ms_mean"),
    ("tpot_s", "tpot", "tpot_ms_mean"),
    ("output_tokens_per_s", "throughput", "output_tokens_per_s"),
)
"""Prediction fields with an interval: (field, error-model family, metric)."""


def prediction_bounds(
    prediction: InferencePrediction,
    sc: ScenarioFile,
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    cal: Calibration,
    uncertainty: Uncertainty,
) -> Bounds:
    """The intervals of ``prediction``'s figures: the group of each metric at the workload's regime
    (fixed by its kind, else its output tokens/s over the deployment's offline rate) and the GPU's evidence."""
    workload, max_model_len = sc.workload, sc.max_model_len
    regime = FIXED_REGIMES.get(workload.scenario)
    if regime is None:
        offline = workload.model_copy(update={"scenario": "offline", "rate_rps": None, "concurrency": None})
        top = predict_inference(model, gpu, layout, offline, cal=cal, max_model_len=max_model_len)
        share = (
            prediction.output_tokens_per_s / top.output_tokens_per_s if top.output_tokens_per_s > 0 else 1.0
        )
        regime = load_regime(share)
    fitted = cal.is_fitted(gpu.family)
    figures = {
        name: (
            getattr(prediction, name),
            group_path(family=family, regime=regime, gpu_fitted=fitted, engine_known=True, metric=metric),
        )
        for name, family, metric in INTERVAL_FIGURES
    }
    return bounds(uncertainty=uncertainty, figures=figures)


def predict_from_scenario(
    sc: ScenarioFile,
    catalog: Catalog,
    cal: Calibration | None = None,
    *,
    spec: ModelSpec | None = None,
    uncertainty: Uncertainty | None = None,
) -> PredictResult:
    """``predict``: latency and throughput of one deployment on one workload (``spec``: a parsed
    config.json instead of the lookup of ``sc.model``; ``cal``: default the bundled calibration;
    ``uncertainty``: the error model's intervals on its figures)."""
    cal = cal or default_calibration()
    model, gpu = spec or get_model(sc.model), deployment_gpu(sc, catalog)
    layout = deployment_layout(sc, model, gpu)
    workload = sc.workload  # as written: the kind's load, or one request per replica when left out
    if (hit := prefix_hit_rate(sc)) != workload.prefix_cache_hit_rate:  # a simulate document's own field
        workload = workload.model_copy(update={"prefix_cache_hit_rate": hit})
    if workload.scenario == "rate" and workload.rate_rps is None:
        raise UserInputError("workload.scenario 'rate' needs workload.rate_rps", hint="e.g. rate_rps: 5")
    check_generation(model, sc)
    prediction = predict_inference(model, gpu, layout, workload, cal=cal, max_model_len=sc.max_model_len)
    basis = scenario_price_basis(sc, catalog)
    typed = sc.prices.usd_per_gpu_hour
    quote = (
        typed_quote(usd_per_gpu_hour=typed, kind=sc.prices.kind)
        if typed
        else catalog.quote(gpu.id, sc.prices.kind, basis)
    )
    per_hour = quote.usd_per_gpu_hour * layout.num_gpus if quote else None
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
        price_basis=basis,
        price_quote=quote,
        interval=None
        if uncertainty is None
        else prediction_bounds(prediction, sc, model, gpu, layout, cal, uncertainty),
    )

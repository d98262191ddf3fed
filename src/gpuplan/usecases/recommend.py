"""``gpuplan recommend``: the cheapest plan that meets the SLA, and the series its charts draw.

:func:`recommend_from_scenario` turns a scenario document into one
:func:`gpuplan.core.recommend.recommend` call; :func:`throughput_scaling` predicts the
throughput-vs-GPU-count series of the recommendation's top GPU types (``recommend --plot`` and the
web page's chart). No rendering here.
"""

from __future__ import annotations

import math

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import GpuplanError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.request import Recommendation, SearchSpace
from gpuplan.core.sim.simulator import Progress
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.predict import predict_from_scenario
from gpuplan.usecases.pricing import scenario_price_basis
from gpuplan.usecases.resolve import check_generation, deployment_speculative, offers, prefix_hit_rate

SCALING_GPU_COUNTS = (1, 2, 4, 8)
"""GPU counts of the throughput-vs-GPUs chart: one tensor-parallel replica of that many GPUs."""
SCALING_MAX_GPU_TYPES = 5
"""GPU types of the throughput-vs-GPUs chart: the first ones in the recommendation's rank order."""


class ScalingPoint(FrozenModel):
    """Saturated (offline) output throughput of one GPU type at one GPU count."""

    gpu: str
    gpus: int
    weight_dtype: str
    output_tokens_per_s: float


def recommend_from_scenario(
    sc: ScenarioFile,
    catalog: Catalog,
    cal: Calibration | None = None,
    *,
    spec: ModelSpec | None = None,
    progress: Progress | None = None,
    basis: PriceBasis | None = None,
    uncertainty: Uncertainty | None = None,
) -> Recommendation:
    """``recommend`` on a scenario document; ``spec`` (a parsed config.json) replaces the lookup of ``sc.model``.
    Every GPU is priced on ``basis`` (default: the market median, :func:`price_basis`); ``uncertainty``:
    intervals on the plans, and plans sized at its ``confidence``."""
    model = spec or get_model(sc.model)
    check_generation(model, sc)
    target = sc.workload.serving_target().model_copy(update={"prefix_cache_hit_rate": prefix_hit_rate(sc)})
    for dtype in sc.precision.allowed or ():
        get_dtype(dtype)
    space = SearchSpace(
        weight_dtypes=tuple(sc.precision.allowed or ("bf16", "fp8", "int4")),
        max_gpus=sc.hardware.max_gpus,
        engine=sc.engine,
        engine_version=sc.engine_version,
        max_usd_per_hour=sc.prices.max_usd_per_hour,
        layout_kinds=sc.layouts.kinds,
        kv_transport=sc.layouts.kv_transport,
        mixed_pools=sc.layouts.mixed_pools,
        speculative=deployment_speculative(sc, model),
    )
    gpus = sc.hardware.gpus or ([sc.hardware.gpu] if sc.hardware.gpu else None)
    basis = basis or scenario_price_basis(sc, catalog)
    return recommend(
        model,
        offers(
            catalog, gpus, price_kind=sc.prices.kind, usd_per_gpu_hour=sc.prices.usd_per_gpu_hour, basis=basis
        ),
        target,
        sla=sc.sla,
        space=space,
        objective=sc.objective,
        cal=cal or default_calibration(),
        ownership=sc.ownership,
        progress=progress,
        price_basis=basis,
        uncertainty=uncertainty,
    )


def throughput_scaling(
    sc: ScenarioFile, catalog: Catalog, rec: Recommendation, *, spec: ModelSpec | None = None
) -> list[ScalingPoint]:
    """Offline output tokens/s of one replica of 1, 2, 4, 8 GPUs of each top GPU type (its best dtype).

    The GPU types are the first :data:`SCALING_MAX_GPU_TYPES` of ``rec``'s plans, each with the
    weight dtype of its best plan; counts above the scenario's ``max_gpus`` are skipped. Layouts
    that do not fit or do not divide the model are left out.
    """
    best: dict[str, str] = {}
    for p in rec.plans:
        if len(best) < SCALING_MAX_GPU_TYPES:
            best.setdefault(p.gpu, p.layout.weight_dtype.name)
    points = []
    for gpu, dtype in best.items():
        for count in (c for c in SCALING_GPU_COUNTS if c <= sc.hardware.max_gpus):
            point = _scaling_point(sc, catalog, gpu, count, dtype, spec)
            if point is not None:
                points.append(point)
    return points


def _scaling_point(
    sc: ScenarioFile, catalog: Catalog, gpu: str, count: int, dtype: str, spec: ModelSpec | None
) -> ScalingPoint | None:
    """The offline throughput of ``count`` GPUs in one tensor-parallel replica; None when it does not fit."""
    one = sc.model_copy(
        update={
            "hardware": sc.hardware.model_copy(update={"gpu": gpu, "count": count}),
            "parallelism": sc.parallelism.model_copy(update={"tp": count, "pp": 1}),
            "precision": sc.precision.model_copy(update={"weights": dtype, "kv_cache": None}),
            "workload": sc.workload.model_copy(update={"scenario": "offline"}),
        }
    )
    try:
        pred = predict_from_scenario(one, catalog, spec=spec).prediction
    except GpuplanError:
        return None
    if not (pred.memory.fits and math.isfinite(pred.output_tokens_per_s)):
        return None
    return ScalingPoint(gpu=gpu, gpus=count, weight_dtype=dtype, output_tokens_per_s=pred.output_tokens_per_s)

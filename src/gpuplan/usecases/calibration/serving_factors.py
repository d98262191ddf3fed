"""The serving model's fittable factors: which a row exercises, their physical ranges, and the robust
least squares (``gpuplan.core.calibration.solver``) over rows priced by the validation predict path.

Shared by the fit on published rows (``published_serving``) and the fit on the user's own serving
runs (``measured``), which differ only in the rows, the prior widths and the factors held fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import DEFAULT_FAMILY, Calibration
from gpuplan.core.calibration.solver import Param, exercised_factors, log_ratio, solve_log_space, with_factors
from gpuplan.core.errors import GpuplanError
from gpuplan.core.perf.peaks import power_limited_fraction, tp_link
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.predict import predict_case

FACTOR_BOUNDS = (0.02, 1.0)
TIME_BOUNDS_S = {
    "step_overhead_s": (1e-5, 5e-3),
    "layer_overhead_s": (1e-7, 1e-3),
    "hop_latency_s": (1e-7, 1e-4),
}
"""Physical ranges: a serving step's host work is 0.01-5 ms (vLLM V1 and TensorRT-LLM profiles); a
kernel launch a few µs; one NVLink/PCIe ring hop 1-100 µs. Bounds stop one engine's few rows from
explaining a link's latency as scheduler overhead."""
START_MARGIN = 0.01
"""A starting value is moved at least 1 % inside its bounds (the solver starts strictly inside)."""
RESIDUAL_SCALE = 0.3
"""soft-L1 scale in log space (≈ 35 % error): a row further off than this pulls linearly, not
quadratically."""
REFERENCE_ENGINE = "trtllm"
"""engine_efficiency is relative to TensorRT-LLM, which is fixed at 1.0."""
LOW_PRECISION_WEIGHTS = ("fp8", "fp4", "int8")


def row_factors(case: Case, catalog: Catalog) -> list[Param]:
    """The factors one row's prediction depends on (none when its GPU is not in the catalog)."""
    try:
        gpu = catalog.get_gpu(case.get("gpu"))
    except GpuplanError:
        return []
    engine = case.get("framework") or DEFAULT_FAMILY
    params: list[Param] = [
        ("compute_efficiency", gpu.family),
        ("bandwidth_efficiency", gpu.family),
        ("step_overhead_s", engine),
        ("layer_overhead_s", ""),
        ("overlap_loss", ""),
    ]
    if engine != REFERENCE_ENGINE:
        params.append(("engine_efficiency", engine))
    if case.get("weight_dtype") in LOW_PRECISION_WEIGHTS:
        params.append(("low_precision_compute_scale", ""))
    tp = case.int_field("tp") or case.int_field("num_gpus") or 1
    if tp > 1:
        params += [("link_efficiency", ""), ("hop_latency_s", tp_link(gpu, tp)[0])]
    if _is_moe(case.get("model")):
        params.append(("expert_efficiency", ""))
    if power_limited_fraction(gpu) < 1.0:
        params.append(("power_limit_exponent", ""))
    return params


def _is_moe(model_id: str) -> bool:
    try:
        return get_model(model_id).moe is not None
    except GpuplanError:
        return False


def fitted_params(cases: Sequence[Case], catalog: Catalog, *, exclude: Sequence[Param] = ()) -> list[Param]:
    """The factors at least ``MIN_ROWS_PER_FACTOR`` cases exercise (never one factor per row)."""
    return exercised_factors((row_factors(c, catalog) for c in cases), exclude=exclude)


def factor_bounds(p: Param) -> tuple[float, float]:
    """The physical range of a factor: ``TIME_BOUNDS_S`` for times, else ``FACTOR_BOUNDS``."""
    return TIME_BOUNDS_S.get(p[0], FACTOR_BOUNDS)


def solve(
    cases: Sequence[Case], catalog: Catalog, start: Calibration, params: Sequence[Param], sigma: np.ndarray
) -> Calibration:
    """Least squares on log(predicted/measured) over ``cases`` (soft-L1, robust to outlier rows), with a
    log-normal prior of width ``sigma`` (log space) around ``start``'s value of each of ``params``."""
    bounds = [factor_bounds(p) for p in params]
    x0 = np.log(
        [
            min(max(start.factor(*p), low * (1 + START_MARGIN)), high * (1 - START_MARGIN))
            for p, (low, high) in zip(params, bounds, strict=True)
        ]
    )
    log_bounds = (np.log([low for low, _ in bounds]), np.log([high for _, high in bounds]))

    def row_residuals(values: np.ndarray) -> list[float]:
        cal = with_factors(start, params, values)
        results = (predict_case(c, catalog, cal, simulate=False) for c in cases)
        return [log_ratio(r.predicted, r.measured) for r in results]

    fitted = solve_log_space(row_residuals, x0, log_bounds, sigma, f_scale=RESIDUAL_SCALE)
    return with_factors(start, params, fitted)

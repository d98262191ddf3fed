"""Refit the calibration factors on validation rows: few physical factors, robust least squares.

Each factor enters as exp(x) so it stays positive; residuals are log(predicted / measured), so a
2× over- and a 2× under-prediction weigh the same. ``soft_l1`` loss keeps one odd row from pulling
a factor. A Gaussian prior in log space (ridge term (x − x_prior)/σ) keeps factors that only a
few rows see near their physically motivated prior (``perf/data/priors.yaml``). A factor is
fitted only when at least ``MIN_ROWS_PER_FACTOR`` rows exercise it; the
others keep their prior value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import DEFAULT_FAMILY, Calibration, FitProvenance
from gpuplan.core.errors import GpuplanError
from gpuplan.core.perf.roofline import power_limited_fraction, tp_link
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.predict import predict_case

MIN_ROWS_PER_FACTOR = 3
DIFF_STEP = 0.02
"""Relative finite-difference step in log space (2 %): predictions are piecewise smooth."""
PRIOR_SIGMA = {
    "step_overhead_s": 1.0,
    "layer_overhead_s": 1.0,
    "hop_latency_s": 1.0,
    "overlap_loss": 1.0,
    "power_limit_exponent": 1.0,
}
"""Prior width in log space: 0.25 (≈ ±28 %) for efficiencies, 1.0 (≈ ×2.7) for latencies, for the
overlap loss, whose prior (0.5: half-way between a pure roofline and no overlap) is only a guess, and
for the power-limit exponent (physically between 1/3 and 1)."""
DEFAULT_PRIOR_SIGMA = 0.25
FACTOR_BOUNDS = (0.02, 1.0)
TIME_BOUNDS_S = {
    "step_overhead_s": (1e-5, 5e-3),
    "layer_overhead_s": (1e-7, 1e-3),
    "hop_latency_s": (1e-7, 1e-4),
}
"""Physical ranges: a serving step's host work is 0.01-5 ms (vLLM V1 and TensorRT-LLM profiles); a
kernel launch a few µs; one NVLink/PCIe ring hop 1-100 µs. Bounds stop one engine's few rows from
explaining a link's latency as scheduler overhead."""
REFERENCE_ENGINE = "trtllm"
"""engine_efficiency is relative to TensorRT-LLM, which is fixed at 1.0."""

Param = tuple[str, str]
"""(calibration field, key) — key '' for scalar fields."""


def _row_params(case: Case, catalog: Catalog) -> list[Param]:
    """The factors one row's prediction depends on."""
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
    if case.get("weight_dtype") in ("fp8", "fp4", "int8"):
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
    counts: dict[Param, int] = {}
    for c in cases:
        for p in _row_params(c, catalog):
            counts[p] = counts.get(p, 0) + 1
    return sorted(p for p, n in counts.items() if n >= MIN_ROWS_PER_FACTOR and p not in exclude)


def _get(cal: Calibration, p: Param) -> float:
    """Current value of a factor; a key the prior lacks starts from its field's default entry."""
    value = getattr(cal, p[0])
    if not p[1]:
        return float(value)
    return float(value.get(p[1], value[DEFAULT_FAMILY]))


def _with(cal: Calibration, params: Sequence[Param], values: np.ndarray) -> Calibration:
    update: dict[str, Any] = {}
    for (field, key), v in zip(params, values, strict=True):
        if key:
            current: dict[str, float] = dict(update.get(field) or getattr(cal, field))
            current[key] = float(v)
            update[field] = current
        else:
            update[field] = float(v)
    return cal.model_copy(update=update)


def _bounds(p: Param) -> tuple[float, float]:
    return TIME_BOUNDS_S.get(p[0], FACTOR_BOUNDS)


def solve(
    cases: Sequence[Case], catalog: Catalog, start: Calibration, params: Sequence[Param], sigma: np.ndarray
) -> Calibration:
    """Least squares on log(predicted/measured) over ``cases`` (soft-L1, robust to outlier rows), with a
    log-normal prior of width ``sigma`` (log space) around ``start``'s value of each of ``params``."""
    x0 = np.log([min(max(_get(start, p), _bounds(p)[0] * 1.01), _bounds(p)[1] * 0.99) for p in params])
    lower = np.log([_bounds(p)[0] for p in params])
    upper = np.log([_bounds(p)[1] for p in params])

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = _with(start, params, np.exp(x))
        out = []
        for c in cases:
            r = predict_case(c, catalog, cal, simulate=False)
            out.append(math.log(r.predicted / r.measured) if r.predicted and r.measured > 0 else 0.0)
        return np.concatenate([np.asarray(out), (x - x0) / sigma])

    result = least_squares(
        residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.3, diff_step=[DIFF_STEP] * len(params)
    )
    return _with(start, params, np.exp(result.x))


SIMULATED_SCENARIOS = ("server", "rate")
"""Rows the serving simulator predicts (validation/predict_server.py). They are left out of the fit:
one of them costs a 600-second simulated run, hundreds of times per fit, and as rows the fit never
saw they test the simulator out of sample."""


def fit_rows(cases: Sequence[Case]) -> list[Case]:
    """The rows the calibration is fitted on: every row the analytic model can price. ``concurrency``
    rows stay in, priced by the analytic closed loop (``predict_case(simulate=False)``), and MLPerf
    ``offline`` rows at their dataset's mean lengths; validation reports both from the simulator
    (closed loop; saturation on the dataset's lengths, 4-6 % lower on the llama2-70b rows)."""
    return [c for c in cases if c.get("scenario") not in SIMULATED_SCENARIOS]


def fit_calibration(
    cases: Sequence[Case], catalog: Catalog, prior: Calibration, *, data: str, command: str
) -> tuple[Calibration, list[Param]]:
    """Fit the factors that enough analytic ``cases`` exercise (``fit_rows``); return the new
    calibration and what was fitted."""
    cases = fit_rows(cases)
    params = fitted_params(cases, catalog)
    sigma = np.asarray([PRIOR_SIGMA.get(p[0], DEFAULT_PRIOR_SIGMA) for p in params])
    fitted = solve(cases, catalog, prior, params, sigma)
    provenance = FitProvenance(
        method="scipy least_squares, soft_l1 on log(pred/measured)",
        data=data,
        rows=len(cases),
        command=command,
        fitted_on=date.today().isoformat(),
    )
    return fitted.model_copy(update={"provenance": provenance}), params

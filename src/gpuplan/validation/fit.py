"""Refit the calibration factors on validation rows: few physical factors, robust least squares.

Each factor enters as exp(x) so it stays positive; residuals are log(predicted / measured), so a
2× over- and a 2× under-prediction weigh the same. ``soft_l1`` loss keeps one odd row from pulling
a factor. A factor is fitted only when at least ``MIN_ROWS_PER_FACTOR`` rows exercise it; the
others keep their prior value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date

import numpy as np
from scipy.optimize import least_squares

from gpuplan.catalog import Catalog
from gpuplan.perf.calibration import Calibration, FitProvenance
from gpuplan.validation.cases import Case
from gpuplan.validation.predict import predict_case

MIN_ROWS_PER_FACTOR = 3
FACTOR_BOUNDS = (0.02, 1.0)
OVERHEAD_BOUNDS_S = (1e-5, 0.05)

Param = tuple[str, str]
"""(calibration field, key) — key '' for scalar fields."""


def _rows_per_param(cases: Sequence[Case], catalog: Catalog) -> dict[Param, int]:
    counts: dict[Param, int] = {}
    for c in cases:
        try:
            family = catalog.get_gpu(c.get("gpu")).family
        except Exception:  # noqa: BLE001 - an unknown GPU simply does not count towards any factor
            continue
        engine = c.get("framework") or "default"
        for p in (("compute_efficiency", family), ("bandwidth_efficiency", family),
                  ("engine_efficiency", engine), ("step_overhead_s", engine)):
            counts[p] = counts.get(p, 0) + 1
    counts[("low_precision_compute_scale", "")] = sum(c.get("weight_dtype") in ("fp8", "fp4", "int8") for c in cases)
    counts[("link_efficiency", "")] = sum((c.int_field("tp") or 1) > 1 for c in cases)
    return counts


def _get(cal: Calibration, p: Param) -> float:
    value = getattr(cal, p[0])
    return float(value[p[1]] if p[1] else value)


def _with(cal: Calibration, params: Sequence[Param], values: np.ndarray) -> Calibration:
    update: dict[str, object] = {}
    for (field, key), v in zip(params, values, strict=True):
        if key:
            current = dict(update.get(field) or getattr(cal, field))  # type: ignore[call-overload]
            current[key] = float(v)
            update[field] = current
        else:
            update[field] = float(v)
    return cal.model_copy(update=update)


def _bounds(p: Param) -> tuple[float, float]:
    return OVERHEAD_BOUNDS_S if p[0] == "step_overhead_s" else FACTOR_BOUNDS


def fit_calibration(cases: Sequence[Case], catalog: Catalog, prior: Calibration, *, data: str,
                    command: str) -> tuple[Calibration, list[Param]]:
    """Fit the factors that enough ``cases`` exercise; return the new calibration and what was fitted."""
    counts = _rows_per_param(cases, catalog)
    params = [p for p, n in sorted(counts.items()) if n >= MIN_ROWS_PER_FACTOR and p[1] != "trtllm"
              or p == ("step_overhead_s", "trtllm")]
    params = [p for p in params if p[0] != "engine_efficiency" or p[1] not in ("trtllm", "default")]
    x0 = np.log([min(max(_get(prior, p), _bounds(p)[0] * 1.01), _bounds(p)[1] * 0.99)
                 if _has(prior, p) else 0.5 for p in params])
    lower = np.log([_bounds(p)[0] for p in params])
    upper = np.log([_bounds(p)[1] for p in params])

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = _with(prior, params, np.exp(x))
        out = []
        for c in cases:
            r = predict_case(c, catalog, cal)
            out.append(math.log(r.predicted / r.measured) if r.predicted and r.measured > 0 else 0.0)
        return np.asarray(out)

    result = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.3, diff_step=0.02)
    fitted = _with(prior, params, np.exp(result.x))
    provenance = FitProvenance(method="scipy least_squares, soft_l1 on log(pred/measured)", data=data,
                               rows=len(cases), command=command, fitted_on=date.today().isoformat())
    return fitted.model_copy(update={"provenance": provenance}), params


def _has(cal: Calibration, p: Param) -> bool:
    value = getattr(cal, p[0])
    return not p[1] or p[1] in value

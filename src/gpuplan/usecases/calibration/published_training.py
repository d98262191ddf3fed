"""Refit the training factors on training.csv rows: few physical factors, robust least squares.

Modelled on :mod:`gpuplan.usecases.calibration.published`: factors enter as exp(x) (positive), residuals are
log(predicted / measured) with a ``soft_l1`` loss, a Gaussian prior in log space keeps each factor
near its physical prior, and a factor is fitted only when at least ``MIN_ROWS_PER_FACTOR`` rows
exercise it (never one constant per row). Run::

    PYTHONPATH=src python3 -m gpuplan.usecases.calibration.published_training ../shared/validation/training.csv
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from gpuplan.adapters.catalog.loader import Catalog, default_catalog
from gpuplan.core.calibration.serving import FitProvenance
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.data.calibration import default_training_calibration
from gpuplan.usecases.validation.cases import Case, Skip, read_cases
from gpuplan.usecases.validation.predict_training import THROUGHPUT_METRICS, predict_training_with

MIN_ROWS_PER_FACTOR = 3
PRIOR_SIGMA = 0.35
"""Prior width in log space (≈ ±40 %) for every factor."""
BOUNDS: dict[str, tuple[float, float]] = {
    "mfu": (0.05, 0.9),
    "gemm_half_width": (10.0, 4096.0),
    "attention_efficiency": (0.1, 1.5),
    "dp_overlap": (0.05, 1.0),
    "tp_overlap": (0.0, 0.95),
    "dequant_bandwidth_efficiency": (0.01, 1.0),
}
FIT_GRADES = frozenset({"A", "B"})
Param = tuple[str, str]


def _row_params(case: Case, catalog: Catalog) -> list[Param]:
    try:
        family = catalog.get_gpu(case.get("gpu")).family
    except GpuplanError:
        return []
    dtype = case.get("dtype")
    method = case.get("method")
    key = "int4" if method == "qlora" else dtype if dtype in ("fp8", "fp4") else "bf16"
    params: list[Param] = [("mfu", f"{family}:{key}"), ("gemm_half_width", ""), ("attention_efficiency", "")]
    gpus = case.int_field("num_gpus") or 1
    if gpus > 1:
        params.append(("dp_overlap", ""))
    if (case.int_field("tp") or 1) * (case.int_field("cp") or 1) * (case.int_field("ep") or 1) > 1:
        params.append(("tp_overlap", ""))
    if method == "qlora":
        params.append(("dequant_bandwidth_efficiency", ""))
    return params


def fitted_params(cases: Sequence[Case], catalog: Catalog) -> list[Param]:
    counts: dict[Param, int] = {}
    for c in cases:
        for p in _row_params(c, catalog):
            counts[p] = counts.get(p, 0) + 1
    return sorted(p for p, n in counts.items() if n >= MIN_ROWS_PER_FACTOR)


def _get(cal: TrainingCalibration, p: Param) -> float:
    if p[0] == "mfu":
        family, dtype = p[1].split(":")
        return cal.mfu_for(family, dtype)
    return float(getattr(cal, p[0]))


def _with(cal: TrainingCalibration, params: Sequence[Param], values: np.ndarray) -> TrainingCalibration:
    update: dict[str, Any] = {"mfu": dict(cal.mfu)}
    for (field, key), v in zip(params, values, strict=True):
        if key:
            update[field][key] = float(v)
        else:
            update[field] = float(v)
    return cal.model_copy(update=update)


def _residual(case: Case, catalog: Catalog, cal: TrainingCalibration) -> float:
    try:
        predicted = predict_training_with(case, catalog, cal)
    except (Skip, GpuplanError):
        return 0.0
    if predicted <= 0 or case.value <= 0:
        return 0.0
    return math.log(predicted / case.value)


def fit_training_calibration(
    cases: Sequence[Case], catalog: Catalog, prior: TrainingCalibration, *, data: str, command: str
) -> tuple[TrainingCalibration, list[Param]]:
    """Fit the factors enough ``cases`` exercise; return the new calibration and the fitted factors."""
    params = fitted_params(cases, catalog)
    lower = np.log([max(BOUNDS[p[0]][0], 1e-3) for p in params])
    upper = np.log([BOUNDS[p[0]][1] for p in params])
    x0 = np.clip(np.log([max(_get(prior, p), 1e-3) for p in params]), lower + 1e-6, upper - 1e-6)

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = _with(prior, params, np.exp(x))
        out = [_residual(c, catalog, cal) for c in cases]
        return np.concatenate([np.asarray(out), (x - x0) / PRIOR_SIGMA])

    steps = [0.02] * len(params)
    result = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.2, diff_step=steps)
    provenance = FitProvenance(
        method="scipy least_squares, soft_l1 on log(pred/measured), log-normal prior sigma 0.35",
        data=data,
        rows=len(cases),
        command=command,
        fitted_on=date.today().isoformat(),
    )
    fitted = _with(prior, params, np.exp(result.x))
    return fitted.model_copy(update={"provenance": provenance}), params


def main(argv: Sequence[str]) -> int:
    """Fit on the A+B throughput rows of a training.csv and print the calibration YAML."""
    path = Path(argv[0])
    _, cases = read_cases(path)
    chosen = [c for c in cases if c.quality in FIT_GRADES and c.metric in THROUGHPUT_METRICS]
    command = "PYTHONPATH=src python3 -m gpuplan.usecases.calibration.published_training " + " ".join(argv)
    cal, params = fit_training_calibration(
        chosen,
        default_catalog(),
        default_training_calibration(),
        data=f"{path.name} grades A+B",
        command=command,
    )
    sys.stdout.write(yaml.safe_dump(cal.model_dump(mode="json"), sort_keys=False))
    sys.stderr.write("fitted: " + ", ".join(f"{f}[{k}]" if k else f for f, k in params) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

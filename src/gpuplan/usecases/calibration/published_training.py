"""Refit the training factors on training.csv rows: few physical factors, robust least squares.

The same robust regularised least squares as the serving fit (``gpuplan.core.calibration.solver``):
factors enter as exp(x) (positive), residuals are log(predicted / measured) with a ``soft_l1`` loss,
a Gaussian prior in log space keeps each factor near its physical prior, and a factor is fitted only
when at least ``MIN_ROWS_PER_FACTOR`` rows exercise it (never one constant per row). Run::

    PYTHONPATH=src python3 -m gpuplan.usecases.calibration.published_training ../shared/validation/training.csv
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from gpuplan.adapters.catalog.loader import Catalog, default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.solver import Param, exercised_factors, log_ratio, solve_log_space, with_factors
from gpuplan.core.calibration.training import QLORA_KEY, TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.training.step import machine_balance
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.calibration.profile import fit_provenance
from gpuplan.usecases.validation.cases import Case, Skip, read_cases
from gpuplan.usecases.validation.predict_training import THROUGHPUT_METRICS, predict_training_with
from gpuplan.usecases.validation.training_rows import fused_kernels, training_dtype

PRIOR_SIGMA = 0.35
"""Prior width in log space (≈ ±40 %) for every factor."""
BOUNDS: dict[str, tuple[float, float]] = {
    "mfu": (0.05, 0.9),
    "gemm_half_width": (10.0, 4096.0),
    "attention_efficiency": (0.1, 1.5),
    "dp_overlap": (0.05, 1.0),
    "tp_overlap": (0.0, 0.95),
    "dequant_bandwidth_efficiency": (0.01, 1.0),
    "expert_gemm_efficiency": (0.1, 1.5),
    "expert_tokens_half": (1.0, 65536.0),
    "host_overhead_s": (1e-5, 1e-2),
}
MIN_LOG_BOUND = 1e-3
"""Smallest factor value the fit works with: a lower bound of 0 (``tp_overlap``) has no logarithm."""
START_MARGIN_LOG = 1e-6
"""A starting value is moved this far (log space) inside its bounds (the solver starts strictly inside)."""
RESIDUAL_SCALE = 0.2
"""soft-L1 scale in log space (≈ 22 % error): a row further off than this pulls linearly."""
FIT_GRADES = frozenset({"A", "B"})


def row_factors(case: Case, catalog: Catalog) -> list[Param]:
    """The factors one training row's prediction depends on (none when its GPU is not in the catalog)."""
    try:
        family = catalog.get_gpu(case.get("gpu")).family
    except GpuplanError:
        return []
    dtype = training_dtype(case)
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
    if _is_moe(case):
        params += [("expert_gemm_efficiency", ""), ("expert_tokens_half", "")]
    if not fused_kernels(case):
        params.append(("host_overhead_s", ""))  # eager PyTorch: the host can be the floor of small steps
    return params


def _is_moe(case: Case) -> bool:
    try:
        return get_model(case.get("model")).moe is not None
    except GpuplanError:
        return False


def _residual(case: Case, catalog: Catalog, cal: TrainingCalibration) -> float:
    try:
        predicted = predict_training_with(case, catalog, cal)
    except (Skip, GpuplanError):
        return 0.0
    return log_ratio(predicted, case.value)


def fit_training_calibration(
    cases: Sequence[Case], catalog: Catalog, prior: TrainingCalibration, *, data: str, command: str
) -> tuple[TrainingCalibration, list[Param]]:
    """Fit the factors enough ``cases`` exercise; return the new calibration and the fitted factors."""
    params = exercised_factors(row_factors(c, catalog) for c in cases)
    lower = np.log([max(BOUNDS[p[0]][0], MIN_LOG_BOUND) for p in params])
    upper = np.log([BOUNDS[p[0]][1] for p in params])
    start = np.log([max(prior.factor(*p), MIN_LOG_BOUND) for p in params])
    x0 = np.clip(start, lower + START_MARGIN_LOG, upper - START_MARGIN_LOG)

    def row_residuals(values: np.ndarray) -> list[float]:
        cal = with_factors(prior, params, values)
        return [_residual(c, catalog, cal) for c in cases]

    values = solve_log_space(row_residuals, x0, (lower, upper), PRIOR_SIGMA, f_scale=RESIDUAL_SCALE)
    provenance = fit_provenance(
        method="scipy least_squares, soft_l1 on log(pred/measured), log-normal prior sigma 0.35",
        data=data,
        rows=len(cases),
        command=command,
    )
    fitted = with_factors(prior, params, values)
    balances = {**prior.balance_flop_per_byte, **_balances(cases, catalog, params)}
    return fitted.model_copy(update={"provenance": provenance, "balance_flop_per_byte": balances}), params


def _balances(cases: Sequence[Case], catalog: Catalog, params: Sequence[Param]) -> dict[str, float]:
    """Each fitted family factor's machine balance: the geometric mean over the rows that exercise it
    of their GPU's dense peak over HBM bandwidth (``TrainingCalibration.mfu_for`` carries factors to
    uncalibrated families with it)."""
    logs: dict[str, list[float]] = {}
    fitted = {key for field, key in params if field == "mfu"}
    for case in cases:
        for field, key in row_factors(case, catalog):
            if field == "mfu" and key in fitted:
                gpu = catalog.get_gpu(case.get("gpu"))
                dtype = key.split(":")[1]
                logs.setdefault(key, []).append(
                    math.log(machine_balance(gpu, "bf16" if dtype == QLORA_KEY else dtype))
                )
    return {key: math.exp(sum(v) / len(v)) for key, v in sorted(logs.items())}


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

"""Fit a calibration profile to result rows, in three stages that each fix what its data see best.

1. Micro-benchmarks set a family's factors directly (geometric median of achieved / peak):
   ``compute_efficiency`` from 16-bit GEMMs, ``low_precision_compute_scale`` from fp8 GEMMs
   (relative to the 16-bit share), ``bandwidth_efficiency`` from device copies,
   ``link_efficiency`` from all-reduce bus bandwidth.
2. Serving rows fit the remaining factors they exercise (engine efficiency, step and layer
   overheads; a family's compute/bandwidth only when stage 1 had no rows for it) by robust least
   squares on log(predicted / measured), as the fit on published rows does (``serving_factors``),
   with a weak prior (σ = 10 in log space): these are the user's own measurements, so the data
   should dominate.
3. Training rows set ``mfu[family:dtype]`` through the training step model (``measured_train``): each
   row solves the MFU at which ``predict_step`` takes the measured step time; a key takes the geometric
   median of its rows. So the profile's MFU is the factor ``train-plan --calibration`` reads, and a plan
   for the measured job reproduces the measured step.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.solver import Param, with_factors
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.perf.peaks import tp_link
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.calibration.measured_predict import (
    LOW_PRECISION,
    SIXTEEN_BIT,
    as_case,
    gpu_of,
    peak_tflops,
)
from gpuplan.usecases.calibration.measured_rows import ResultRow
from gpuplan.usecases.calibration.measured_train import fit_train_mfu
from gpuplan.usecases.calibration.profile import fit_provenance
from gpuplan.usecases.calibration.serving_factors import fitted_params, solve

POWER_EXPONENT: Param = ("power_limit_exponent", "")
SERVE_PRIOR_SIGMA = 10.0
"""Prior width in log space (a factor of e¹⁰): only a tie-breaker for factors the rows cannot tell apart."""
FACTOR_CAP = 1.0


def _geomedian(ratios: Sequence[float]) -> float:
    return math.exp(statistics.median(math.log(r) for r in ratios))


def _ratios(rows: Sequence[ResultRow], catalog: Catalog, power_exponent: float) -> dict[Param, list[float]]:
    """Achieved / datasheet ratio of each micro row (GEMM peaks net of a board's power cap), keyed by
    the factor it measures."""
    out: dict[Param, list[float]] = defaultdict(list)
    for row in rows:
        gpu = gpu_of(row, catalog)
        if gpu is None or row.value <= 0:
            continue
        dtype = row.fields.get("dtype", "")
        peak = peak_tflops(gpu, dtype, power_exponent) if row.kind == "gemm" else None
        if row.kind == "gemm" and peak and dtype in SIXTEEN_BIT:
            out[("compute_efficiency", gpu.family)].append(row.value / peak)
        elif row.kind == "gemm" and peak and dtype in LOW_PRECISION:
            out[("low_precision:" + gpu.family, "")].append(row.value / peak)
        elif row.kind == "bandwidth":
            out[("bandwidth_efficiency", gpu.family)].append(
                row.value * 1e9 / gpu.memory_bandwidth_bytes_per_s
            )
        elif row.kind == "allreduce":
            link = tp_link(gpu, int(row.fields.get("ranks") or 2))[1]
            out[("link_efficiency", "")].append(row.value * 1e9 / link)
    return out


def fit_micro(
    rows: Sequence[ResultRow], catalog: Catalog, base: Calibration
) -> tuple[Calibration, list[Param]]:
    """Stage 1; returns the calibration and the factors it set (frozen for stage 2)."""
    ratios = _ratios(rows, catalog, base.power_limit_exponent)
    direct = [(p, _geomedian(v)) for p, v in sorted(ratios.items()) if not p[0].startswith("low_precision:")]
    cal = with_factors(base, [p for p, _ in direct], np.asarray([min(v, FACTOR_CAP) for _, v in direct]))
    scales = [
        _geomedian(v) / cal.compute(p[0].split(":", 1)[1])
        for p, v in ratios.items()
        if p[0].startswith("low_precision:")
    ]
    fixed = [p for p, _ in direct]
    if scales:
        cal = cal.model_copy(update={"low_precision_compute_scale": min(statistics.median(scales), 1.5)})
        fixed.append(("low_precision_compute_scale", ""))
    return cal, fixed


def fit_serving(
    rows: Sequence[ResultRow], catalog: Catalog, start: Calibration, fixed: Sequence[Param]
) -> tuple[Calibration, list[Param]]:
    """Stage 2: least squares over the factors ≥ 3 serving rows exercise, less those stage 1 fixed and
    the power-limit exponent (a property of the boards, fitted on the validation set; stage 1 netted
    the GEMM rows with it, so moving it here would undo that)."""
    cases = [as_case(r) for r in rows]
    params = fitted_params(cases, catalog, exclude=[*fixed, POWER_EXPONENT])
    if not params:
        return start, []
    return solve(cases, catalog, start, params, np.full(len(params), SERVE_PRIOR_SIGMA)), params


def fit_profile(
    rows: Sequence[ResultRow],
    catalog: Catalog,
    base: Calibration,
    *,
    data: str,
    command: str,
    training: TrainingCalibration | None = None,
) -> tuple[Calibration, dict[str, float], list[Param]]:
    """All three stages; returns the calibration (with provenance), training MFU and what was fitted.
    ``training`` is the training calibration stage 3 starts from (default: the bundled one)."""
    micro = [r for r in rows if r.kind in ("gemm", "bandwidth", "allreduce")]
    cal, fixed = fit_micro(micro, catalog, base)
    cal, fitted = fit_serving([r for r in rows if r.kind == "serve"], catalog, cal, fixed)
    mfu = fit_train_mfu(
        [r for r in rows if r.kind == "train"], catalog, training or default_training_calibration()
    )
    counts = {k: sum(r.kind == k for r in rows) for k in ("gemm", "bandwidth", "allreduce", "serve", "train")}
    provenance = fit_provenance(
        method="gpuplan calibrate: micro-benchmark geometric medians; serving rows by scipy least_squares "
        "(soft_l1 on log(pred/measured), prior sigma 10); training MFU solved per row through the step "
        "model, geometric medians",
        data=f"{data} ({', '.join(f'{k}: {n}' for k, n in counts.items() if n)})",
        rows=len(rows),
        command=command,
    )
    return cal.model_copy(update={"provenance": provenance}), mfu, [*fixed, *fitted]

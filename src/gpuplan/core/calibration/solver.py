"""Robust regularised least squares in log space: the fit every calibration uses.

Each factor enters as exp(x), so it stays positive; a row's residual is log(predicted / measured), so
a 2× over- and a 2× under-prediction weigh the same; the ``soft_l1`` loss keeps one odd row from
pulling a factor; and a Gaussian prior in log space (ridge term (x − x_start)/σ) keeps a factor that
only a few rows see near its starting value. A factor is fitted only when at least
``MIN_ROWS_PER_FACTOR`` rows exercise it (never one constant per row).

What a factor is, which rows exercise it and how a row is predicted belong to the caller (the serving
and training fits in ``gpuplan.usecases.calibration``); this module holds the mathematics they share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel
from scipy.optimize import least_squares

Param = tuple[str, str]
"""(calibration field, key): key '' for a scalar field, else the entry of a dict field."""
MIN_ROWS_PER_FACTOR = 3
DIFF_STEP = 0.02
"""Relative finite-difference step in log space (2 %): predictions are piecewise smooth."""

Factors = TypeVar("Factors", bound=BaseModel)


def exercised_factors(
    row_factors: Iterable[Iterable[Param]], *, exclude: Collection[Param] = ()
) -> list[Param]:
    """The factors (sorted) that at least ``MIN_ROWS_PER_FACTOR`` rows exercise, less ``exclude``;
    ``row_factors`` holds, per row, the factors its prediction depends on."""
    counts: dict[Param, int] = {}
    for factors in row_factors:
        for p in factors:
            counts[p] = counts.get(p, 0) + 1
    return sorted(p for p, n in counts.items() if n >= MIN_ROWS_PER_FACTOR and p not in exclude)


def with_factors(model: Factors, params: Sequence[Param], values: Sequence[float] | np.ndarray) -> Factors:
    """A copy of ``model`` with each factor of ``params`` set to its value (a dict field keeps its
    other entries)."""
    update: dict[str, Any] = {}
    for (field, key), v in zip(params, values, strict=True):
        if key:
            current: dict[str, float] = dict(update.get(field) or getattr(model, field))
            current[key] = float(v)
            update[field] = current
        else:
            update[field] = float(v)
    return model.model_copy(update=update)


def log_ratio(predicted: float | None, measured: float) -> float:
    """log(predicted / measured), the residual of one row; 0 (no pull) when either is missing or ≤ 0."""
    if predicted is None or predicted <= 0 or measured <= 0:
        return 0.0
    return math.log(predicted / measured)


def solve_log_space(
    row_residuals: Callable[[np.ndarray], Sequence[float]],
    x0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    sigma: np.ndarray | float,
    *,
    f_scale: float,
) -> np.ndarray:
    """The factor values (not their logs) that minimise the soft-L1 loss of ``row_residuals`` plus the
    prior ``(x − x0) / sigma``.

    ``row_residuals`` maps factor values to one residual per row (``log_ratio``); ``x0`` is the log of
    the starting values, inside ``bounds`` (lower and upper, in log space); ``f_scale`` is the residual
    (log space) beyond which a row counts linearly rather than quadratically."""

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(row_residuals(np.exp(x))), (x - x0) / sigma])

    result = least_squares(
        residuals, x0, bounds=bounds, loss="soft_l1", f_scale=f_scale, diff_step=[DIFF_STEP] * len(x0)
    )
    return np.exp(result.x)


SIMULATED_DIFF_STEP = 0.05
"""Relative finite-difference step for fits over simulated predictions (5 %): a finer step chases
the simulator's sampling noise (one seed, a few hundred requests) instead of the factor's effect."""


def solve_bounded(
    residuals: Callable[[np.ndarray], np.ndarray],
    start: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    *,
    max_evals: int = 40,
    f_scale: float | None = None,
) -> tuple[np.ndarray, float, float]:
    """Bounded least squares (``SIMULATED_DIFF_STEP``); the solution, the rms of its residuals and the
    loss it minimised (``least_squares``' cost: half the sum of the loss of each residual).
    ``f_scale``: the ``soft_l1`` loss with that residual scale (residuals well beyond it weigh like
    their absolute value, not its square), else plain squares."""
    fit = least_squares(
        residuals,
        list(start),
        bounds=(list(lower), list(upper)),
        diff_step=[SIMULATED_DIFF_STEP] * len(start),
        max_nfev=max_evals,
        loss="linear" if f_scale is None else "soft_l1",
        f_scale=f_scale or 1.0,
    )
    return fit.x, float(np.sqrt(np.mean(fit.fun**2))), float(fit.cost)

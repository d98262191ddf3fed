"""What a command carries to put intervals on its figures: the error model and the interval level.

A command loads the error model once (``data/error_model.py default_error_model``) and passes one
``Uncertainty`` down; the core reads intervals (``band``) and one-sided factors at a confidence
(``factor``) from it. The groups and their quantiles are those of ``error_model.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import Field

from gpuplan.core.calibration.error_model import (
    MAX_LEVEL,
    MIN_LEVEL,
    ErrorModel,
    deepest_group,
    quantile_at,
)
from gpuplan.core.frozen import FrozenModel

DEFAULT_LEVEL = 0.8
"""The interval shown when none is asked for (issue 17: "default 80 % interval")."""
KNEE_UTILISATION = 0.5
"""Served share of a replica's saturation rate above which a plan is 'near the knee'; the value and
its reason are those of ``usecases/validation/regimes.py`` (the regimes the residuals were grouped by)."""


class Uncertainty(FrozenModel):
    """The error model, the level of the intervals shown (``--interval``) and the confidence plans are
    sized at (``recommend --confidence``; None: the point estimate)."""

    model: ErrorModel
    level: float = Field(default=DEFAULT_LEVEL, ge=MIN_LEVEL, le=MAX_LEVEL)
    confidence: float | None = Field(default=None, ge=MIN_LEVEL, le=MAX_LEVEL)


class IntervalSource(FrozenModel):
    """What one figure's interval is made of: the error-model group it reads and that group's size."""

    group: str
    """The group's path in the error model (``family/regime/evidence/engine/metric``, or a prefix
    when the narrower group has no residuals)."""
    rows: int
    gpus: int
    setups: int | None = None
    """Measurement setups (GPU × source document) of those rows: the ``n`` of the group's shrinkage
    weight (``core/calibration/error_model.py``); None in answers written before 2026-12-06."""


def source(*, model: ErrorModel, path: Sequence[str]) -> IntervalSource | None:
    """The group ``path`` reads (its deepest ancestor with residuals); None when it has none."""
    found = deepest_group(model=model, path=path)
    if found is None:
        return None
    key, group = found
    return IntervalSource(group=key, rows=group.n, gpus=group.gpus, setups=group.setups)


def log_quantile(*, model: ErrorModel, path: Sequence[str], p: float) -> float | None:
    """The ``p`` quantile of log(measured / predicted) of ``path``'s group (None: no group)."""
    found = deepest_group(model=model, path=path)
    if found is None:
        return None
    return quantile_at(grid=model.grid, quantiles=found[1].quantiles, p=p)


def band(*, model: ErrorModel, path: Sequence[str], level: float) -> tuple[float, float] | None:
    """(low, high) multipliers of a prediction at ``level``: exp of the (1∓level)/2 quantiles."""
    low = log_quantile(model=model, path=path, p=(1.0 - level) / 2.0)
    high = log_quantile(model=model, path=path, p=(1.0 + level) / 2.0)
    if low is None or high is None:
        return None
    return math.exp(low), math.exp(high)


def factor(*, model: ErrorModel, path: Sequence[str], p: float) -> float:
    """exp of the ``p`` quantile of ``path``'s group; 1 (the point estimate) when it has none."""
    q = log_quantile(model=model, path=path, p=p)
    return 1.0 if q is None else math.exp(q)


def load_regime(utilisation: float) -> str:
    """The error model's regime of a plan by its served share of the saturation rate (as
    ``usecases/validation/regimes.py load_regime``)."""
    if utilisation >= 1.0:
        return "past saturation"
    return "near the knee" if utilisation >= KNEE_UTILISATION else "light load"


class Bounds(FrozenModel):
    """Intervals on a result's figures (``predict``, ``fit``): their level, the ends of each figure
    (same units and names as the figures; null without a finite prediction) and the group each read."""

    level: float
    low: dict[str, float | None]
    high: dict[str, float | None]
    sources: dict[str, IntervalSource]


def bounds(*, uncertainty: Uncertainty, figures: Mapping[str, tuple[float | None, Sequence[str]]]) -> Bounds:
    """Each figure ``name: (predicted, group path)`` with its interval at ``uncertainty.level``; a
    figure whose path reaches no group is left out."""
    model, level = uncertainty.model, uncertainty.level
    low: dict[str, float | None] = {}
    high: dict[str, float | None] = {}
    sources: dict[str, IntervalSource] = {}
    for name, (value, path) in figures.items():
        ends, where = band(model=model, path=path, level=level), source(model=model, path=path)
        if ends is None or where is None:
            continue
        ok = value is not None and math.isfinite(value) and value > 0
        low[name] = value * ends[0] if ok and value is not None else None
        high[name] = value * ends[1] if ok and value is not None else None
        sources[name] = where
    return Bounds(level=level, low=low, high=high, sources=sources)

"""An empirical error model: quantiles of log(measured / predicted) per group, sparse groups shrunk.

Each residual carries a *path* of group keys from the broadest to the narrowest, e.g.
``("throughput", "saturated", "gpu calibrated", "engine known", "output_tokens_per_s")``. Every
prefix of a path is a group. Rows of one *measurement setup* (one GPU in one source document: one
harness, software stack and clock) share a bias, so the unit of evidence is the setup, not the row:
within a group each setup weighs equally (its rows share one unit of weight), and a group's
quantiles at the probabilities of ``QUANTILE_GRID`` are its setup-weighted empirical quantiles pooled
with its parent's (already shrunk) quantiles,

    q_group(p) = w · q_empirical(p) + (1 − w) · q_parent(p),   w = n / (n + k),

with ``n`` the setups the group has rows of and ``k`` the shrinkage strength (``SHRINKAGE_K``). The top
level (one group per metric family) is its own empirical distribution. A prediction whose path
reaches a group with no residuals uses its deepest ancestor that has some.

An interval at level L is ``predicted · exp(q((1−L)/2))`` to ``predicted · exp(q((1+L)/2))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from gpuplan.core.frozen import FrozenModel

QUANTILE_GRID: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995,
)  # fmt: skip
"""Probabilities at which each group's quantiles are held: both ends of every interval from 50 % to
99 % lie on or between two of them (linear interpolation in between)."""
SHRINKAGE_K = 5.0
"""Pseudo-count, in setups, of the parent group: a child's own quantiles get weight n/(n+k), n its
setups. The development sets have 1-30 setups per group, so a child of 5 setups moves halfway.
Chosen among 3, 5, 10 and 20 by the held-out coverage of docs/validate.md (Intervals), 2026-12-06:
3 made the training-memory groups too narrow for a GPU they had not seen (67 % inside the 80 %
intervals), 10 and 20 too wide (87-92 %)."""
MIN_LEVEL = 0.5
MAX_LEVEL = 0.99
"""The interval levels a user may ask for (``--interval``): the grid's ends cover 99 %."""
SEPARATOR = "/"


FITTED = "gpu calibrated"
PRIOR = "gpu priors only"
NOT_FITTED = "no fitted factors"
"""Memory: no factor of the memory model is fitted on measurements, so the GPU's evidence level does
not apply."""
ENGINE_KNOWN = "engine known"
ENGINE_UNKNOWN = "engine not known"


def group_path(
    *, family: str, regime: str, gpu_fitted: bool | None, engine_known: bool, metric: str
) -> tuple[str, ...]:
    """A prediction's group path, broadest first: metric family, load regime, evidence for the GPU
    (``gpu_fitted`` True: its family's factors were fitted on measurements; False: priors only; None:
    nothing fitted prices it), whether the engine is known, the metric."""
    evidence = NOT_FITTED if gpu_fitted is None else FITTED if gpu_fitted else PRIOR
    return (family, regime, evidence, ENGINE_KNOWN if engine_known else ENGINE_UNKNOWN, metric)


class Residual(FrozenModel):
    """One held-out residual: where it belongs and log(measured / predicted)."""

    source: str
    """The validation file the row came from."""
    id: str
    gpu: str
    """The GPU the row measured: the unit the error model is held out by (``held_out_coverage``)."""
    setup: str
    """The measurement setup (its GPU and its source document): the unit of evidence, whose rows
    share one unit of weight. Files written before 2026-12-06 have none: each GPU is one setup."""
    path: tuple[str, ...] = Field(min_length=1)
    log_ratio: float

    @model_validator(mode="before")
    @classmethod
    def _setup_defaults_to_gpu(cls, data: Any) -> Any:
        if isinstance(data, dict) and "setup" not in data and "gpu" in data:
            return {**data, "setup": data["gpu"]}
        return data


class ErrorGroup(FrozenModel):
    """One group's size and its shrunk quantiles of log(measured / predicted) at ``QUANTILE_GRID``."""

    n: int = Field(ge=1)
    """Residuals (rows)."""
    gpus: int = Field(ge=1)
    """GPUs those rows are of."""
    setups: int = Field(ge=1)
    """Measurement setups those rows are of: the ``n`` of the shrinkage weight."""
    quantiles: tuple[float, ...]


class ErrorModel(FrozenModel):
    """Groups keyed by their path joined with ``SEPARATOR``."""

    shrinkage_k: float = Field(gt=0)
    grid: tuple[float, ...]
    groups: dict[str, ErrorGroup]


class ErrorModelInput(FrozenModel):
    """One validation file the residuals were computed from: its digest and row counts."""

    sha256: str
    rows: int = Field(ge=0)
    """Rows of the chosen grades."""
    residuals: int = Field(ge=0)
    how: str
    """How its residuals were held out."""


class ErrorModelProvenance(FrozenModel):
    command: str
    built_on: str
    grades: tuple[str, ...]
    inputs: dict[str, ErrorModelInput]


class ErrorModelData(FrozenModel):
    """The shipped file: how it was built and the held-out residuals the groups are built from."""

    about: str
    provenance: ErrorModelProvenance
    shrinkage_k: float = Field(gt=0)
    residuals: tuple[Residual, ...]

    def model(self) -> ErrorModel:
        return build_error_model(residuals=self.residuals, k=self.shrinkage_k)


class Coverage(FrozenModel):
    """How often held-out measured values fall inside their interval, and how wide it is."""

    n: int
    level: float
    coverage: float | None
    median_width: float | None
    """Median of high / low − 1."""


def group_key(path: Sequence[str]) -> str:
    """The key of a group path in ``ErrorModel.groups``."""
    return SEPARATOR.join(path)


def shrink(*, own: Sequence[float], parent: Sequence[float] | None, n: int, k: float) -> tuple[float, ...]:
    """Quantiles pooled with the parent's: w·own + (1−w)·parent, w = n/(n+k); ``own`` when no parent."""
    if parent is None:
        return tuple(float(q) for q in own)
    w = n / (n + k)
    return tuple(float(w * a + (1.0 - w) * b) for a, b in zip(own, parent, strict=True))


def weighted_quantiles(
    *, values: Sequence[float], weights: Sequence[float], ps: Sequence[float]
) -> tuple[float, ...]:
    """Quantiles of a weighted sample: each value sits at the midpoint of its share of the cumulative
    weight (for equal weights, the Hazen plotting position (i − ½)/n), linear in between and flat
    beyond the ends."""
    order = np.argsort(values, kind="stable")
    v = np.asarray(values, dtype=float)[order]
    w = np.asarray(weights, dtype=float)[order]
    position = (np.cumsum(w) - 0.5 * w) / w.sum()
    return tuple(float(q) for q in np.interp(list(ps), position, v))


def setup_weights(residuals: Sequence[Residual]) -> list[float]:
    """1 / (rows of the residual's setup among ``residuals``): every setup weighs one unit."""
    rows: dict[str, int] = {}
    for r in residuals:
        rows[r.setup] = rows.get(r.setup, 0) + 1
    return [1.0 / rows[r.setup] for r in residuals]


def build_error_model(
    *, residuals: Sequence[Residual], k: float = SHRINKAGE_K, grid: Sequence[float] = QUANTILE_GRID
) -> ErrorModel:
    """Every prefix of every residual's path as a group, parents first, each shrunk to its parent
    (setup-weighted quantiles, module docstring)."""
    members: dict[tuple[str, ...], list[Residual]] = {}
    for r in residuals:
        for depth in range(1, len(r.path) + 1):
            members.setdefault(r.path[:depth], []).append(r)
    shrunk: dict[tuple[str, ...], tuple[float, ...]] = {}
    groups: dict[str, ErrorGroup] = {}
    for path in sorted(members, key=lambda p: (len(p), p)):
        rows = members[path]
        own = weighted_quantiles(values=[r.log_ratio for r in rows], weights=setup_weights(rows), ps=grid)
        setups = len({r.setup for r in rows})
        shrunk[path] = shrink(own=own, parent=shrunk.get(path[:-1]), n=setups, k=k)
        groups[group_key(path)] = ErrorGroup(
            n=len(rows), gpus=len({r.gpu for r in rows}), setups=setups, quantiles=shrunk[path]
        )
    return ErrorModel(shrinkage_k=k, grid=tuple(grid), groups=groups)


def deepest_group(*, model: ErrorModel, path: Sequence[str]) -> tuple[str, ErrorGroup] | None:
    """The narrowest group on ``path`` that has residuals (None: not even its family has)."""
    for depth in range(len(path), 0, -1):
        key = group_key(path[:depth])
        if key in model.groups:
            return key, model.groups[key]
    return None


def quantile_at(*, grid: Sequence[float], quantiles: Sequence[float], p: float) -> float:
    """The quantile at probability ``p`` (inside the grid's range), linear between grid points."""
    if not grid[0] <= p <= grid[-1]:
        raise ValueError(f"probability {p} outside the grid [{grid[0]}, {grid[-1]}]")
    return float(np.interp(p, grid, quantiles))


def interval(
    *, model: ErrorModel, path: Sequence[str], predicted: float, level: float
) -> tuple[float, float] | None:
    """The ``level`` interval around ``predicted`` (None when no group on ``path`` has residuals or
    the prediction is not a positive finite number)."""
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise ValueError(f"interval level {level} outside [{MIN_LEVEL}, {MAX_LEVEL}]")
    found = deepest_group(model=model, path=path)
    if found is None or not (math.isfinite(predicted) and predicted > 0):
        return None
    group = found[1]
    low = quantile_at(grid=model.grid, quantiles=group.quantiles, p=(1.0 - level) / 2.0)
    high = quantile_at(grid=model.grid, quantiles=group.quantiles, p=(1.0 + level) / 2.0)
    return predicted * math.exp(low), predicted * math.exp(high)


def _score(
    *, model: ErrorModel, residuals: Sequence[Residual], level: float
) -> tuple[list[bool], list[float]]:
    inside: list[bool] = []
    widths: list[float] = []
    for r in residuals:
        ends = interval(model=model, path=r.path, predicted=1.0, level=level)
        if ends is None:
            continue
        inside.append(ends[0] <= math.exp(r.log_ratio) <= ends[1])
        widths.append(ends[1] / ends[0] - 1.0)
    return inside, widths


def _coverage(inside: Sequence[bool], widths: Sequence[float], level: float) -> Coverage:
    if not inside:
        return Coverage(n=0, level=level, coverage=None, median_width=None)
    return Coverage(
        n=len(inside), level=level, coverage=float(np.mean(inside)), median_width=float(np.median(widths))
    )


def coverage(*, model: ErrorModel, residuals: Sequence[Residual], level: float) -> Coverage:
    """Coverage of ``model``'s ``level`` intervals on ``residuals`` (in-sample when the model was built
    from them)."""
    return _coverage(*_score(model=model, residuals=residuals, level=level), level)


def held_out_coverage(
    *,
    residuals: Sequence[Residual],
    level: float,
    k: float = SHRINKAGE_K,
    family: str | None = None,
    source: str | None = None,
) -> Coverage:
    """Coverage of the ``level`` intervals on each residual, the error model rebuilt without its GPU
    (leave-one-GPU-out for the error model itself); ``family`` and ``source`` restrict the rows scored
    (not the rows the model is built from). Residuals are log(measured / predicted), so a row is
    inside when q_low ≤ log_ratio ≤ q_high."""
    scored = [
        r
        for r in residuals
        if (family is None or r.path[0] == family) and (source is None or r.source == source)
    ]
    inside: list[bool] = []
    widths: list[float] = []
    for gpu in sorted({r.gpu for r in scored}):
        model = build_error_model(residuals=[r for r in residuals if r.gpu != gpu], k=k)
        fold = _score(model=model, residuals=[r for r in scored if r.gpu == gpu], level=level)
        inside += fold[0]
        widths += fold[1]
    return _coverage(inside, widths, level)

"""``gpuplan validate --intervals``: each predicted row gets the error model's interval, and the summary
says how often the measured value falls inside it.

A row's group path in the error model (``core/calibration/error_model.py``) is, broadest first: its
metric family, its load regime, whether its GPU family's factors were fitted on measurements, whether
it names a known engine, and its metric. The error model is built from held-out residuals
(``usecases/calibration/error_model_build.py``); the rows validated here are predicted with the bundled
calibration, so their coverage shows how the shipped intervals read on these rows, not a held-out test
(docs/validate.md, "Intervals").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.error_model import ErrorModel, group_path, interval
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import GpuplanError
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.validation import validate_file
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult
from gpuplan.usecases.validation.report import MetricStats, Summary, ValidationReport

DEFAULT_INTERVAL = 0.8
THROUGHPUT_METRICS = frozenset(
    {"output_tokens_per_s", "output_tokens_per_s_per_gpu", "requests_per_s", "total_tokens_per_s"}
)
LATENCY_FAMILIES = ("ttft", "tpot", "itl", "e2e")
INFERENCE_MEMORY_METRICS = frozenset({"kv_cache_blocks"})
"""memory.csv metrics of ``method`` inference rows that are serving memory (vLLM's KV blocks)."""
NO_INTERVAL_METRICS = frozenset({"fits"})
"""A yes/no has no ratio to bound."""


def metric_family(case: Case) -> str | None:
    """The error model's top-level group of a row (None: no interval for this metric)."""
    metric = case.metric
    if metric in NO_INTERVAL_METRICS:
        return None
    if case.schema_name == "training":
        return "training speed"
    if case.schema_name == "inference_memory" or metric in INFERENCE_MEMORY_METRICS:
        return "inference memory"
    if case.schema_name == "memory":
        return "training memory"
    if metric in THROUGHPUT_METRICS:
        return "throughput"
    prefix = metric.split("_", 1)[0]
    return prefix if prefix in LATENCY_FAMILIES else None


def row_path(case: Case, result: RowResult, *, gpu_fitted: bool | None) -> tuple[str, ...] | None:
    """The row's group path (``core/calibration/error_model.py`` ``group_path``): ``gpu_fitted`` None for
    rows priced without fitted factors (memory); the engine is known when the row names one (or a
    training framework) other than ``other``."""
    family = metric_family(case)
    if family is None:
        return None
    framework = case.get("framework")
    return group_path(
        family=family,
        regime=result.regime,
        gpu_fitted=gpu_fitted,
        engine_known=bool(framework) and framework != "other",
        metric=case.metric,
    )


def gpu_family(case: Case, catalog: Catalog) -> str | None:
    """The catalog family of the row's GPU (None when it names none the catalog knows)."""
    try:
        return catalog.get_gpu(case.get("gpu")).family
    except GpuplanError:
        return None


def bundled_gpu_fitted(
    case: Case, catalog: Catalog, cal: Calibration, tcal: TrainingCalibration
) -> bool | None:
    """Whether the factors the row is priced with were fitted on measurements of its GPU family
    (None for memory rows, which no fitted factor prices)."""
    if case.schema_name in ("inference_memory", "memory"):
        return None
    family = gpu_family(case, catalog)
    if family is None:
        return False
    if case.schema_name == "training":
        return any(key.split(":")[0] == family for key in tcal.mfu)
    return cal.is_fitted(family) and cal.provenance.rows > 0


class IntervalRow(RowResult):
    """A validated row with its interval (same unit as ``predicted``; null where it is null)."""

    low: float | None
    high: float | None


class IntervalStats(MetricStats):
    coverage: float | None
    """Share of the rows with an interval whose measured value lies in [low, high]."""
    median_width: float | None
    """Median of high / low − 1 over those rows."""


class IntervalSummary(Summary):
    interval: float
    by_metric: dict[str, IntervalStats]  # type: ignore[assignment]


class IntervalReport(ValidationReport):
    summary: IntervalSummary
    rows: list[IntervalRow]  # type: ignore[assignment]


def coverage_stats(rows: Sequence[IntervalRow]) -> tuple[float | None, float | None]:
    """(share of rows with measured in [low, high], median of high/low − 1) over rows with an interval."""
    bounded = [r for r in rows if r.low is not None and r.high is not None]
    if not bounded:
        return None, None
    inside = [r.low <= r.measured <= r.high for r in bounded if r.low is not None and r.high is not None]
    widths = [r.high / r.low - 1.0 for r in bounded if r.low is not None and r.high is not None and r.low > 0]
    return float(np.mean(inside)), (float(np.median(widths)) if widths else None)


def with_interval(
    result: RowResult, path: tuple[str, ...] | None, *, model: ErrorModel, level: float
) -> IntervalRow:
    """``result`` with the ``level`` interval of its group (null ends without a prediction or group)."""
    ends = None
    if result.predicted is not None and path is not None:
        ends = interval(model=model, path=path, predicted=result.predicted, level=level)
    low, high = ends if ends is not None else (None, None)
    return IntervalRow(**result.model_dump(), low=low, high=high)


def interval_report(report: ValidationReport, rows: Sequence[IntervalRow], *, level: float) -> IntervalReport:
    """``report`` with its rows replaced by ``rows`` and coverage and width per metric."""
    by_metric: dict[str, IntervalStats] = {}
    for metric, st in report.summary.by_metric.items():
        coverage, width = coverage_stats([r for r in rows if r.metric == metric])
        by_metric[metric] = IntervalStats(**st.model_dump(), coverage=coverage, median_width=width)
    summary = IntervalSummary(
        **report.summary.model_dump(exclude={"by_metric"}), interval=level, by_metric=by_metric
    )
    return IntervalReport(
        file=report.file,
        schema_name=report.schema_name,
        grades=report.grades,
        summary=summary,
        rows=list(rows),
    )


def validate_with_intervals(
    path: Path, *, catalog: Catalog, cal: Calibration, grades: Sequence[str], model: ErrorModel, level: float
) -> IntervalReport:
    """``gpuplan validate --intervals``: the report of ``validate_file`` with each row's interval."""
    report = validate_file(path, catalog=catalog, cal=cal, grades=grades)
    keep = set(report.grades)
    cases = [c for c in read_cases(path)[1] if c.quality in keep]
    tcal = default_training_calibration()
    rows = [
        with_interval(
            r, row_path(c, r, gpu_fitted=bundled_gpu_fitted(c, catalog, cal, tcal)), model=model, level=level
        )
        for c, r in zip(cases, report.rows, strict=True)
    ]
    return interval_report(report, rows, level=level)

"""``gpuplan validate``: predict published measurements and report the error by metric and grade."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult, predict_case
from gpuplan.usecases.validation.report import ValidationReport, summarise

__all__ = ["DEFAULT_GRADES", "ValidationReport", "predict_rows", "validate_file"]

DEFAULT_GRADES = ("A", "B")


def predict_rows(cases: Iterable[Case], catalog: Catalog, cal: Calibration) -> list[RowResult]:
    """Predict every case (skips carry their reason)."""
    return [predict_case(c, catalog, cal) for c in cases]


def validate_file(
    path: Path, *, catalog: Catalog, cal: Calibration, grades: Iterable[str] = DEFAULT_GRADES
) -> ValidationReport:
    """Read a validation CSV, keep rows of ``grades``, predict them and summarise."""
    schema, cases = read_cases(path)
    keep = {g.upper() for g in grades}
    chosen = [c for c in cases if c.quality in keep]
    rows = predict_rows(chosen, catalog, cal)
    return ValidationReport(
        file=str(path), schema_name=schema, grades=sorted(keep), summary=summarise(rows), rows=rows
    )

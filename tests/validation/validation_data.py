"""Shared helpers of the accuracy tests: the validation reports (cached) and their APEs.

The data lives next to the repository (``../shared/validation``: CI clones the repo beside a copy
of shared/); callers skip when it is absent.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.validation import validate_file
from gpuplan.usecases.validation.report import ValidationReport

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "validation"
GRADES = ("A", "B")


def missing_data_banner(shared: Path) -> list[str]:
    """The lines to print when ``shared`` (the validation data folder) is absent; none when present."""
    if shared.is_dir():
        return []
    return [
        f"validation data not found at {shared}: every accuracy test in tests/validation was SKIPPED,",
        "so this run says nothing about prediction error. Clone the repository next to shared/ to run them.",
    ]


@cache
def report(name: str, grades: tuple[str, ...] = GRADES) -> ValidationReport:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"validation data not found at {path} (clone the repo next to shared/)")
    return validate_file(path, catalog=default_catalog(), cal=default_calibration(), grades=grades)


def apes(
    rep: ValidationReport,
    metrics: Iterable[str] | None = None,
    *,
    prefix: str | None = None,
) -> np.ndarray:
    """APEs of the predicted rows of ``metrics`` (or of every metric starting with ``prefix``)."""
    wanted = set(metrics or ())
    values = [
        r.ape
        for r in rep.rows
        if r.ape is not None and (r.metric in wanted or (prefix is not None and r.metric.startswith(prefix)))
    ]
    assert values, f"no predicted rows for {sorted(wanted) or prefix}"
    return np.asarray(values)

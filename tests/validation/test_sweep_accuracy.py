"""Accuracy along published load curves (``serving_sweeps.csv``), on A+B+C rows not past saturation.

Thresholds are issue 16's acceptance criteria. Every sweep row is C or B (raw benchmark outputs with
one or two stated assumptions), so all three grades are judged. Rows whose notes say they are at or
above saturation are judged on throughput only by the source's own advice; they are left out here
by that note, never by id.
"""

from __future__ import annotations

import numpy as np
import pytest
from validation_data import report

from gpuplan.usecases.validation.report import ValidationReport

pytestmark = pytest.mark.validation

ALL_GRADES = ("A", "B", "C")
THROUGHPUT = ("output_tokens_per_s", "requests_per_s")


def _sweeps() -> ValidationReport:
    return report("serving_sweeps.csv", ALL_GRADES)


def _apes(prefix: tuple[str, ...]) -> np.ndarray:
    values = [
        r.ape
        for r in _sweeps().rows
        if r.ape is not None and r.regime != "past saturation" and r.metric.startswith(prefix)
    ]
    assert values, f"no predicted sweep rows for {prefix}"
    return np.asarray(values)


def test_every_sweep_row_is_predicted() -> None:
    summary = _sweeps().summary
    assert summary.predicted / summary.rows >= 0.95, f"{summary.predicted}/{summary.rows} rows predicted"


@pytest.mark.parametrize(
    ("prefix", "median", "mape"),
    [(("ttft_",), 0.35, 0.50), (("tpot_",), 0.20, 0.30), (("itl_",), 0.20, 0.30), (THROUGHPUT, 0.20, 0.30)],
)
def test_sweep_error_by_metric(prefix: tuple[str, ...], median: float, mape: float) -> None:
    errors = _apes(prefix)
    assert np.median(errors) <= median, f"{prefix} median APE {np.median(errors):.3f} over {errors.size} rows"
    assert errors.mean() <= mape, f"{prefix} MAPE {errors.mean():.3f} over {errors.size} rows"

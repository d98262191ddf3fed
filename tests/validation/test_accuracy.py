"""Accuracy against published measurements (shared/validation), on quality A+B rows.

The data lives next to the repository (``../shared/validation``: CI clones the repo beside a copy
of shared/); the tests skip when it is absent. Thresholds are the issues' acceptance criteria: on
``inference.csv`` issue 16's "no regression" bounds (throughput median 10 %, MAPE 14 %; TTFT and TPOT
MAPE 25 %; the constrained rate of MLPerf Server rows MAPE 15 %).
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
    assert np.median(errors) <= 0.10, f"pooled median APE {np.median(errors):.3f} over {errors.size} rows"


def test_throughput_mape() -> None:
    errors = apes(report("inference.csv"), THROUGHPUT)
    assert errors.mean() <= 0.14, f"pooled MAPE {errors.mean():.3f} over {errors.size} rows"


CLIENT_LIMITED_ROW = "I0444"
"""llmperf at 'concurrency 64' on an A10G: 311 tokens/s with a 1.8 s TTFT, which 64 clients in a
closed loop cannot produce at any TPOT the same source reports (docs/validate.md)."""
SUSPECT_KV_ROW = "IM0178"
"""gpt-oss-120b on one H100 at 0.95: 1.71 GiB of KV means ~7.5 GiB of non-weight memory at start-up,
where gpuplan's vLLM accounting leaves 1.3 GiB and llm-d measured 3.6 GiB on the same card (IM0010);
a small pool makes a 1 GiB miss a 60 % error (docs/validate.md)."""


@pytest.mark.parametrize(
    ("csv_name", "row_id"), [("inference.csv", CLIENT_LIMITED_ROW), ("inference_memory.csv", SUSPECT_KV_ROW)]
)
def test_rows_known_to_be_wrong_are_not_graded_a_or_b(csv_name: str, row_id: str) -> None:
    """shared/validation grades these two rows C, so the full-set TTFT and KV-GiB checks below hold
    (each row alone was an 8.0x and a 5.8x miss that failed its threshold); if either is graded A or
    B again, this names the row before its MAPE check fails."""
    assert row_id not in {row.id for row in report(csv_name).rows}, f"{row_id} is graded A or B again"


def test_ttft_mape() -> None:
    errors = apes(report("inference.csv"), prefix="ttft_")
    assert errors.mean() <= 0.25, f"TTFT MAPE {errors.mean():.3f} over {errors.size} rows"


def test_tpot_mape() -> None:
    errors = apes(report("inference.csv"), prefix="tpot_")
    assert errors.mean() <= 0.25, f"TPOT MAPE {errors.mean():.3f} over {errors.size} rows"


def test_constrained_rate_mape() -> None:
    """MLPerf Server rows are judged on the highest rate whose P99s meet their constraint; an
    over-predicted one is a plan under-provisioned for its SLA."""
    errors = [
        r.ape for r in report("inference.csv").rows if r.regime == "constrained rate" and r.ape is not None
    ]
    assert errors, "no constrained-rate row predicted"
    assert float(np.mean(errors)) <= 0.15, (
        f"constrained-rate MAPE {np.mean(errors):.3f} over {len(errors)} rows"
    )


# --- inference_memory.csv --------------------------------------------------------------------------


def test_weights_mape() -> None:
    errors = apes(report("inference_memory.csv"), ["weights_gib_per_gpu"])
    assert errors.mean() <= 0.05, f"weights_gib_per_gpu MAPE {errors.mean():.3f} over {errors.size} rows"


@pytest.mark.parametrize(
    "metric",
    [
        "kv_cache_gib_per_gpu",
        "kv_cache_tokens",
        "max_concurrency_at_len",
    ],
)
def test_kv_metric_mape(metric: str) -> None:
    errors = apes(report("inference_memory.csv"), [metric])
    assert errors.mean() <= 0.15, f"{metric} MAPE {errors.mean():.3f} over {errors.size} rows"

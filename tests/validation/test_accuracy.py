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


CLIENT_LIMITED_ROW = "I0444"
"""llmperf at 'concurrency 64' on an A10G: 311 tokens/s with a 1.8 s TTFT, which 64 clients in a
closed loop cannot produce at any TPOT the same source reports (docs/validate.md)."""
SUSPECT_KV_ROW = "IM0178"
"""gpt-oss-120b on one H100 at 0.95: 1.71 GiB of KV means ~7.5 GiB of non-weight memory at start-up,
where gpuplan's vLLM accounting leaves 1.3 GiB and llm-d measured 3.6 GiB on the same card (IM0010);
a small pool makes a 1 GiB miss a 60 % error (docs/validate.md)."""


@pytest.mark.xfail(
    strict=False,
    reason="measured 2026-11-30: TTFT pooled MAPE 0.61 over 18 rows (median 0.16); I0444 "
    "(concurrency 64 on A10G) is predicted 8.0x too high; 0.24 without it",
)
def test_ttft_mape() -> None:
    errors = apes(report("inference.csv"), prefix="ttft_")
    assert errors.mean() <= 0.40, f"TTFT MAPE {errors.mean():.3f} over {errors.size} rows"


def test_ttft_mape_without_the_client_limited_row() -> None:
    """Guards the other 17 TTFT rows (closed-loop, single-request and simulated P99) against regressions."""
    errors = apes(report("inference.csv"), prefix="ttft_", without=[CLIENT_LIMITED_ROW])
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
                reason="measured 2026-11-29: MAPE 0.46 over 13 rows (median 0.04); IM0178 5.8x, IM0133 0.34x",
            ),
        ),
        "kv_cache_tokens",
        "max_concurrency_at_len",
    ],
)
def test_kv_metric_mape(metric: str) -> None:
    errors = apes(report("inference_memory.csv"), [metric])
    assert errors.mean() <= 0.15, f"{metric} MAPE {errors.mean():.3f} over {errors.size} rows"


def test_kv_gib_mape_without_the_suspect_row() -> None:
    """Guards the other 12 KV-pool rows against regressions."""
    errors = apes(report("inference_memory.csv"), ["kv_cache_gib_per_gpu"], without=[SUSPECT_KV_ROW])
    assert errors.mean() <= 0.15, f"kv_cache_gib_per_gpu MAPE {errors.mean():.3f} over {errors.size} rows"

"""Training-planner accuracy against published measurements (shared/validation), quality A+B rows.

Thresholds are issue 4's acceptance criteria: tokens/s per GPU and model TFLOP/s per GPU MAPE ≤ 20 %,
step time MAPE ≤ 25 %, memory.csv training peak GiB MAPE ≤ 15 %, ≥ 90 % of A+B rows predicted.
"""

from __future__ import annotations

import numpy as np
import pytest
from validation_data import apes, report

pytestmark = pytest.mark.validation


def test_training_rows_predicted() -> None:
    rep = report("training.csv")
    throughput = [
        r for r in rep.rows if r.metric in ("tokens_per_s_per_gpu", "tflops_per_gpu", "step_time_s")
    ]
    predicted = sum(r.predicted is not None for r in throughput)
    assert predicted >= 0.90 * len(throughput), f"{predicted}/{len(throughput)} throughput rows predicted"


@pytest.mark.parametrize(
    ("metric", "limit"), [("tokens_per_s_per_gpu", 0.20), ("tflops_per_gpu", 0.20), ("step_time_s", 0.25)]
)
def test_training_metric_mape(metric: str, limit: float) -> None:
    errors = apes(report("training.csv"), [metric])
    assert np.mean(errors) <= limit, f"{metric} MAPE {np.mean(errors):.3f} over {errors.size} rows"


def test_training_peak_memory_mape() -> None:
    errors = apes(report("memory.csv"), ["peak_gib_per_gpu"])
    assert np.mean(errors) <= 0.15, f"peak GiB MAPE {np.mean(errors):.3f} over {errors.size} rows"

"""The shared calibration solver: which factors are fitted, how values are laid into a calibration, and
that the robust log-space least squares recovers a known factor, honours its bounds and its prior."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuplan.core.calibration.solver import (
    MIN_ROWS_PER_FACTOR,
    Param,
    exercised_factors,
    log_ratio,
    solve_log_space,
    with_factors,
)
from gpuplan.data.bundled_calibration import default_calibration, default_training_calibration

COMPUTE_HOPPER: Param = ("compute_efficiency", "hopper")
LINK: Param = ("link_efficiency", "")


def test_only_factors_enough_rows_exercise_are_fitted_sorted_less_excluded() -> None:
    rows = [[LINK, COMPUTE_HOPPER]] * MIN_ROWS_PER_FACTOR + [[("overlap_loss", "")]] * (
        MIN_ROWS_PER_FACTOR - 1
    )
    assert exercised_factors(rows) == [COMPUTE_HOPPER, LINK]
    assert exercised_factors(rows, exclude=[LINK]) == [COMPUTE_HOPPER]
    assert exercised_factors(iter(rows)) == [COMPUTE_HOPPER, LINK]  # a generator is read once


def test_with_factors_sets_keyed_and_scalar_factors_and_leaves_the_original() -> None:
    cal = default_calibration()
    params = [COMPUTE_HOPPER, ("compute_efficiency", "ampere"), LINK]
    fitted = with_factors(cal, params, np.array([0.5, 0.4, 0.7]))
    assert fitted.compute_efficiency == cal.compute_efficiency | {"hopper": 0.5, "ampere": 0.4}
    assert fitted.link_efficiency == 0.7
    assert fitted.bandwidth_efficiency == cal.bandwidth_efficiency
    assert cal.link_efficiency != 0.7 and cal.compute_efficiency.get("hopper") != 0.5


def test_factor_reads_what_the_model_reads() -> None:
    cal = default_calibration()
    assert cal.factor("compute_efficiency", "no-such-family") == cal.compute("no-such-family")
    assert cal.factor(*LINK) == cal.link_efficiency
    training = default_training_calibration()
    assert training.factor("mfu", "hopper:bf16") == training.mfu_for("hopper", "bf16")
    assert training.factor("dp_overlap") == training.dp_overlap


@pytest.mark.parametrize(
    ("predicted", "measured", "expected"),
    [
        (2.0, 1.0, math.log(2.0)),
        (1.0, 4.0, -math.log(4.0)),
        (None, 1.0, 0.0),
        (0.0, 1.0, 0.0),
        (1.0, 0.0, 0.0),
    ],
)
def test_log_ratio(predicted: float | None, measured: float, expected: float) -> None:
    assert log_ratio(predicted, measured) == pytest.approx(expected)


def _one_factor_fit(truth: float, *, start: float, sigma: float, upper: float = 1.0) -> float:
    """Rows measure ``truth · t`` and the model predicts ``factor · t``; one outlier row is 3× off."""
    loads = np.linspace(1.0, 10.0, 20)
    measured = [*(truth * loads), 3 * truth]

    def residuals(values: np.ndarray) -> list[float]:
        predicted = [*(values[0] * loads), values[0]]
        return [log_ratio(p, m) for p, m in zip(predicted, measured, strict=True)]

    bounds = (np.log([0.02]), np.log([upper]))
    return float(solve_log_space(residuals, np.log([start]), bounds, sigma, f_scale=0.3)[0])


def test_solver_recovers_a_factor_despite_an_outlier_row() -> None:
    assert _one_factor_fit(0.6, start=0.3, sigma=10.0) == pytest.approx(0.6, rel=0.02)


def test_a_narrow_prior_holds_the_factor_near_its_start() -> None:
    held = _one_factor_fit(0.6, start=0.3, sigma=0.01)
    assert held == pytest.approx(0.3, rel=0.05)


def test_the_fit_stays_inside_the_bounds() -> None:
    assert _one_factor_fit(0.9, start=0.3, sigma=10.0, upper=0.5) == pytest.approx(0.5)

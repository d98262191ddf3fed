"""The error model's quantiles, shrinkage, lookup and intervals, on residuals with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuplan.core.calibration.error_model import (
    QUANTILE_GRID,
    Residual,
    build_error_model,
    deepest_group,
    held_out_coverage,
    interval,
    quantile_at,
    shrink,
)
from gpuplan.core.calibration.uncertainty import source


def _res(
    path: tuple[str, ...], value: float, gpu: str = "G", i: int = 0, setup: str | None = None
) -> Residual:
    """A residual; its setup is its GPU unless named (one source document per GPU)."""
    return Residual(source="t.csv", id=f"R{i}", gpu=gpu, setup=setup or gpu, path=path, log_ratio=value)


def test_shrink_weights_own_quantiles_by_n_over_n_plus_k() -> None:
    # n = 10, k = 10: half own, half parent
    assert shrink(own=[1.0, 2.0], parent=[3.0, 6.0], n=10, k=10.0) == (2.0, 4.0)
    # n = 30, k = 10: 3/4 own
    assert shrink(own=[0.0], parent=[4.0], n=30, k=10.0) == (1.0,)
    assert shrink(own=[0.5], parent=None, n=2, k=10.0) == (0.5,)


def _uniform_quantile(p: float, n: int = 201) -> float:
    """Hazen quantile of n evenly spaced values in [-1, 1]: value i sits at (i + ½)/n."""
    return -1.0 + 2.0 * (n * p - 0.5) / (n - 1)


def test_top_group_is_its_own_empirical_distribution() -> None:
    values = np.linspace(-1.0, 1.0, 201)
    model = build_error_model(residuals=[_res(("f",), float(v), i=i) for i, v in enumerate(values)])
    group = model.groups["f"]
    assert (group.n, group.gpus, group.setups) == (201, 1, 1)
    for p, q in zip(QUANTILE_GRID, group.quantiles, strict=True):
        assert q == pytest.approx(_uniform_quantile(p), abs=1e-12)


def test_each_setup_weighs_one_unit_whatever_its_rows() -> None:
    # setup A: 99 rows at 0; setup B: 1 row at 1. Unweighted, 99 % of the mass is at 0; by setup, half.
    rows = [_res(("f",), 0.0, gpu="A", i=i) for i in range(99)] + [_res(("f",), 1.0, gpu="B", i=99)]
    model = build_error_model(residuals=rows)
    quantiles = model.groups["f"].quantiles
    # A's rows sit at the midpoints of their weight, up to (1 − ½/99)/2; B's one row at 0.75
    last_a = (1 - 0.5 / 99) / 2
    assert quantile_at(grid=model.grid, quantiles=quantiles, p=0.25) == 0.0
    assert quantile_at(grid=model.grid, quantiles=quantiles, p=0.75) == pytest.approx(1.0)
    assert quantile_at(grid=model.grid, quantiles=quantiles, p=0.6) == pytest.approx(
        (0.6 - last_a) / (0.75 - last_a)
    )


def test_two_setups_of_one_gpu_weigh_two_units() -> None:
    # GPU A measured by two documents (99 rows at 0, 1 row at 1), GPU B by one (1 row at 0):
    # three setups, a third of the mass at 1, though A's rows are 99 of 101 and GPUs are two
    rows = [_res(("f",), 0.0, gpu="A", i=i, setup="A doc1") for i in range(99)]
    rows += [_res(("f",), 1.0, gpu="A", i=99, setup="A doc2"), _res(("f",), 0.0, gpu="B", i=100)]
    group = build_error_model(residuals=rows).groups["f"]
    assert (group.n, group.gpus, group.setups) == (101, 2, 3)

    # B's row sits at the middle of the second third (1/2), the row at 1 of the last (5/6), linear between
    def q(p: float) -> float:
        return quantile_at(grid=QUANTILE_GRID, quantiles=group.quantiles, p=p)

    assert q(0.4) == 0.0
    assert q(0.95) == pytest.approx(1.0)
    assert q(0.75) == pytest.approx((0.75 - 0.5) / (5 / 6 - 0.5))


def test_child_shrinks_by_its_setups_not_its_gpus() -> None:
    # parent: 30 setups at 0; child: one GPU measured by 10 documents at 1, k = 10: w = 10/20
    parent_only = [_res(("f", "a"), 0.0, gpu=f"G{i}", i=i) for i in range(30)]
    child = [_res(("f", "b"), 1.0, gpu="H", i=100 + i, setup=f"H doc{i}") for i in range(10)]
    model = build_error_model(residuals=parent_only + child, k=10.0)
    assert (model.groups["f/b"].gpus, model.groups["f/b"].setups) == (1, 10)
    median_b = quantile_at(grid=model.grid, quantiles=model.groups["f/b"].quantiles, p=0.5)
    assert median_b == pytest.approx(0.5)


def test_child_is_pulled_towards_parent_by_the_named_weight() -> None:
    parent_only = [_res(("f", "a"), 0.0, gpu=f"G{i}", i=i) for i in range(30)]
    child = [_res(("f", "b"), 1.0, gpu=f"H{i}", i=100 + i) for i in range(10)]
    model = build_error_model(residuals=parent_only + child, k=10.0)
    # family f: 30 GPUs at 0 and 10 at 1; median 0; its own quantiles, no parent
    assert model.groups["f"].gpus == 40
    assert quantile_at(grid=model.grid, quantiles=model.groups["f"].quantiles, p=0.5) == 0.0
    # child b: own median 1, parent 0, w = 10 GPUs / (10 + 10)
    median_b = quantile_at(grid=model.grid, quantiles=model.groups["f/b"].quantiles, p=0.5)
    assert median_b == pytest.approx(0.5)


def test_lookup_falls_back_to_the_deepest_group_with_rows() -> None:
    model = build_error_model(residuals=[_res(("f", "a"), 0.1, i=i) for i in range(5)])
    key, group = deepest_group(model=model, path=("f", "unseen", "x")) or ("", None)
    assert key == "f"
    assert group is not None and group.n == 5
    assert deepest_group(model=model, path=("other",)) is None
    assert interval(model=model, path=("other",), predicted=10.0, level=0.8) is None


def test_interval_ends_are_prediction_times_exp_quantiles() -> None:
    values = np.linspace(-1.0, 1.0, 201)
    model = build_error_model(residuals=[_res(("f",), float(v), i=i) for i, v in enumerate(values)])
    low, high = interval(model=model, path=("f",), predicted=100.0, level=0.8) or (0.0, 0.0)
    assert low == pytest.approx(100.0 * math.exp(_uniform_quantile(0.1)))  # ≈ exp(-0.804)
    assert high == pytest.approx(100.0 * math.exp(_uniform_quantile(0.9)))
    # a 50 % interval lies inside the 80 % one
    low50, high50 = interval(model=model, path=("f",), predicted=100.0, level=0.5) or (0.0, 0.0)
    assert low < low50 < 100.0 < high50 < high


def test_interval_level_outside_the_grid_is_refused() -> None:
    model = build_error_model(residuals=[_res(("f",), 0.0)])
    with pytest.raises(ValueError, match=r"outside \[0.5, 0.99\]"):
        interval(model=model, path=("f",), predicted=1.0, level=0.995)
    assert interval(model=model, path=("f",), predicted=0.0, level=0.8) is None


def test_held_out_coverage_matches_the_level_on_normal_residuals() -> None:
    rng = np.random.default_rng(7)
    residuals = [
        _res(("f",), float(v), gpu=f"G{i % 10}", i=i) for i, v in enumerate(rng.normal(0.0, 0.2, 2000))
    ]
    for level in (0.5, 0.8):
        cov = held_out_coverage(residuals=residuals, level=level)
        assert cov.n == 2000
        assert cov.coverage == pytest.approx(level, abs=0.03)
        # width of a normal(0, 0.2) interval in ratio: exp(2 z σ) − 1
        z = {0.5: 0.6745, 0.8: 1.2816}[level]
        assert cov.median_width == pytest.approx(math.exp(2 * z * 0.2) - 1.0, rel=0.08)


def test_held_out_coverage_does_not_score_a_gpu_on_its_own_residuals() -> None:
    # GPU A's residuals are far from everyone else's: held out, its rows fall outside
    others = [_res(("f",), 0.0, gpu=f"G{i % 4}", i=i) for i in range(40)]
    odd = [_res(("f",), 2.0, gpu="A", i=100 + i) for i in range(40)]
    cov = held_out_coverage(residuals=others + odd, level=0.8, family="f")
    assert cov.coverage == pytest.approx(0.5)  # the 40 zeros inside, the 40 twos outside


def test_interval_source_names_the_groups_setups() -> None:
    rows = [_res(("f",), 0.0, gpu="A", i=i, setup=f"A doc{i % 2}") for i in range(6)]
    found = source(model=build_error_model(residuals=rows), path=("f", "unseen"))
    assert found is not None
    assert (found.group, found.rows, found.gpus, found.setups) == ("f", 6, 1, 2)


def test_a_residual_written_before_setups_is_its_gpus_setup() -> None:
    old = Residual.model_validate(
        {"source": "t.csv", "id": "R1", "gpu": "A", "path": ["f"], "log_ratio": 0.1}
    )
    assert old.setup == "A"

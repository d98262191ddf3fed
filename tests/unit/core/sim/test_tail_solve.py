"""The tail model's two searches (``core/sim/tail_solve.py``) against the slow forms they replace:
plain fixed-point iteration and bisection, on functions with known answers and on the tail model itself."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.search import one_replica
from gpuplan.core.sim import tail_model
from gpuplan.core.sim.tail_solve import highest_passing, smallest_fixed_point
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

IN, OUT = 2048, 300
SLA = Sla(ttft_p99_ms=2000, tpot_p99_ms=100)
GRID = 4096


def _solve(g: Callable[[float], float], ceiling: float, start: float = 0.0) -> tuple[str, float]:
    return smallest_fixed_point(g, start=start, ceiling=ceiling, tolerance=1e-12, max_evals=60)


@pytest.mark.parametrize("gain", [0.2, 0.9, 0.99])
def test_linear_map_reaches_its_root_where_plain_iteration_crawls(gain: float) -> None:
    evals: list[float] = []

    def g(n: float) -> float:
        evals.append(n)
        return 3.0 + gain * n

    status, root = _solve(g, ceiling=1e6)
    assert status == "ok" and root == pytest.approx(3.0 / (1.0 - gain), rel=1e-9)
    assert len(evals) <= 8  # plain iteration needs log(1e-12)/log(gain): ~2,700 steps at 0.99


@pytest.mark.parametrize("ceiling", [5.0, 100.0])
def test_convex_map_gives_the_stable_root_not_the_runaway_one(ceiling: float) -> None:
    """g = 1 + n²/8 crosses the diagonal at 4 − √8 (stable) and 4 + √8 (unstable): plain iteration
    from 0 climbs to the first, whether the ceiling lies between the roots or past both."""
    status, root = _solve(lambda n: 1.0 + n * n / 8.0, ceiling=ceiling)
    assert status == "ok" and root == pytest.approx(4.0 - math.sqrt(8.0), rel=1e-9)
    warm = _solve(lambda n: 1.0 + n * n / 8.0, ceiling=ceiling, start=1.0)
    assert warm[0] == "ok" and warm[1] == pytest.approx(root, rel=1e-9)


def test_no_root_below_the_ceiling_or_an_infinite_step_is_reported() -> None:
    assert _solve(lambda n: n + 1.0, ceiling=50.0)[0] == "ceiling"
    assert _solve(lambda n: 3.0 + n if n < 2.0 else math.inf, ceiling=50.0)[0] == "infinite"


def _replica(gpu: str, dtype: str, tp: int = 1) -> ReplicaModel:
    offer = resolve.offers(default_catalog(), [gpu])[0]
    target = Workload(scenario="rate", input_tokens=IN, output_tokens=OUT, rate_rps=1)
    model = get_model("meta-llama/Llama-3.1-8B")
    return one_replica(model, offer.gpu, Layout(tp=tp, weight_dtype=dtype), target, default_calibration())


def _plain_fixed_point(lane: tail_model._Lane, rate: float) -> float | str:
    """The decode batch by plain iteration from 0, run until it stops moving (the old solver, without
    its 40-step and 1e-3 stops)."""
    gaps, others = OUT - 1, 0.0
    state = tail_model._decode_at(lane, rate, others)
    for _ in range(100_000):
        if state.share >= 1.0:
            return "prefill interference"
        new = rate * gaps * state.tpot_s
        if new >= lane.seats:
            return "batch limit"
        if abs(new - others) <= 1e-14 * max(others, 1.0):
            return new
        others = new
        state = tail_model._decode_at(lane, rate, others)
    raise AssertionError("plain iteration did not settle")


@pytest.mark.parametrize(
    ("gpu", "dtype", "tp"), [("H100-SXM", "fp8", 1), ("L4", "fp8", 1), ("MI300X", "bf16", 2)]
)
def test_decode_fixed_point_is_the_plain_iterations_limit(gpu: str, dtype: str, tp: int) -> None:
    """Up to the replica's P99 capacity and past it, where the loop gain nears 1: the accelerated
    solver lands on the batch plain iteration converges to, or the same stability limit."""
    replica = _replica(gpu, dtype, tp)
    lane = tail_model._lane(replica, IN, OUT)
    capacity = tail_model.tail_max_rate(replica, input_tokens=IN, output_tokens=OUT, slo=SLA)
    for share in (0.3, 0.7, 0.95, 1.0, 1.1, 2.0):
        fast = tail_model._decode_fixed_point(lane, share * capacity)
        plain = _plain_fixed_point(lane, share * capacity)
        if isinstance(plain, str):
            assert fast == plain
        else:
            assert not isinstance(fast, str) and fast.others == pytest.approx(plain, rel=1e-9, abs=1e-9)


def _bisection(passes: Callable[[int], bool]) -> int:
    lo, hi = 0, GRID
    for _ in range(12):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if passes(mid) else (lo, mid)
    return lo


SHAPES: dict[str, Callable[[float, float], float]] = {  # excess at x for a threshold t (0 at x = t)
    "linear": lambda x, t: x / t - 1.0,
    "convex": lambda x, t: (x / t) ** 3 - 1.0,
    "runaway": lambda x, t: math.inf if x > 1.5 * t else (x / t) / (1.6 - x / t) - 1.0 / 0.6,
    "kinked": lambda x, t: 0.2 * (x / t - 1.0) if x < t else 3.0 * (x / t - 1.0),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_highest_passing_is_the_point_bisection_finds(shape: str) -> None:
    counts = []
    for threshold in (1.0, 7.3, 100.5, 1234.56, 4000.2, 4094.9):

        def excess(j: int, t: float = threshold) -> float:
            return SHAPES[shape](float(j), t) if j else -1.0

        calls: list[int] = []

        def test(j: int, calls: list[int] = calls) -> tuple[bool, float]:
            calls.append(j)
            value = excess(j)
            return value <= 0.0, value

        found = highest_passing(test, grid=GRID, excess_at_zero=excess(0))
        assert found == _bisection(lambda j: excess(j) <= 0.0)
        assert len(calls) <= 2 * 12 + 2
        counts.append(len(calls))
    assert sum(counts) / len(counts) < 12  # fewer points than bisection's 12, on the whole


def test_enough_ends_the_search_at_a_passing_point_below_the_answer() -> None:
    def test(j: int) -> tuple[bool, float]:
        return j <= 2500, j / 2500 - 1.0

    full = highest_passing(test, grid=GRID, excess_at_zero=-1.0)
    early = highest_passing(test, grid=GRID, excess_at_zero=-1.0, enough=lambda lo, hi: hi - lo < 200)
    assert full == 2500 and early <= full and test(early)[0]


@pytest.mark.parametrize(
    ("gpu", "dtype", "tp"), [("H100-SXM", "fp8", 1), ("L4", "fp8", 1), ("A100-80GB-SXM", "bf16", 2)]
)
def test_tail_max_rate_is_the_bisection_of_the_old_search(gpu: str, dtype: str, tp: int) -> None:
    """The rate search returns what 12 halvings of [0, top] returned, estimate for estimate; with
    ``enough`` it stops at a passing rate at or below it."""
    replica = _replica(gpu, dtype, tp)
    lane = tail_model._lane(replica, IN, OUT)
    top = lane.seats / (lane.lone_prefill_s + (OUT - 1) * lane.decode_s(lane.seats))
    while tail_model._estimate(lane, top).stable:
        top *= 2.0
    lo, hi = 0.0, top
    for _ in range(12):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if tail_model._meets(tail_model._estimate(lane, mid), SLA) else (lo, mid)
    rate = tail_model.tail_max_rate(replica, input_tokens=IN, output_tokens=OUT, slo=SLA)
    assert rate > 0 and rate == pytest.approx(lo, rel=1e-12)
    early = tail_model.tail_max_rate(
        replica, input_tokens=IN, output_tokens=OUT, slo=SLA, enough=lambda a, b: b - a < 0.1 * rate
    )
    assert 0 < early <= rate and tail_model._meets(tail_model._estimate(lane, early), SLA)

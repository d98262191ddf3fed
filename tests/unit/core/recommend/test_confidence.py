"""``recommend`` with intervals and at a confidence (issue 17, items 2-4): the error model's bands on
each plan's figures, the capacity interval through the queue, and plans sized at a quantile."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.uncertainty import Uncertainty, band
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.confidence import LayoutKey, at_margin, layout_key, margin
from gpuplan.core.recommend.intervals import queue_ratios, with_intervals
from gpuplan.core.recommend.request import GpuOffer, Plan, Recommendation
from gpuplan.core.recommend.search import one_replica
from gpuplan.core.sim.tail_model import tail_max_rate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases import resolve

CAL = default_calibration()
SLA = Sla(tpot_ms=40)
TARGET = Workload(scenario="rate", input_tokens=512, output_tokens=128, rate_rps=40)
SURE = Uncertainty(model=default_error_model())
P99_SLA = Sla(ttft_p99_ms=1500, tpot_p99_ms=60)


@pytest.fixture(scope="module")
def llama8b() -> ModelSpec:
    return get_model("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def offers() -> list[GpuOffer]:
    return resolve.offers(default_catalog(), ["L4", "H100-SXM"])


def _rec(
    model: ModelSpec, offers: list[GpuOffer], q: float | None, target: Workload = TARGET
) -> Recommendation:
    sure = SURE.model_copy(update={"confidence": q})
    return recommend(model, offers, target, sla=SLA, cal=CAL, uncertainty=sure)


def _counts(rec: Recommendation) -> dict[LayoutKey, int]:
    return {layout_key(p): p.num_gpus for p in rec.plans}


@pytest.fixture(scope="module")
def point(llama8b: ModelSpec, offers: list[GpuOffer]) -> Recommendation:
    return _rec(llama8b, offers, None)


@pytest.fixture(scope="module")
def at90(llama8b: ModelSpec, offers: list[GpuOffer]) -> Recommendation:
    return _rec(llama8b, offers, 0.9)


def test_margin_is_the_error_models_quantiles_clamped_to_the_point() -> None:
    m = margin(model=SURE.model, calibrated=True, confidence=0.9)
    thr = ("throughput", "saturated", "gpu calibrated", "engine known", "output_tokens_per_s")
    ends = band(model=SURE.model, path=thr, level=0.8)  # the 10 % quantile is the 80 % band's low end
    assert ends is not None
    assert m.capacity == pytest.approx(min(1.0, ends[0]))
    assert m.capacity < 1.0 and m.ttft >= 1.0 and m.tpot >= 1.0
    target, sla = at_margin(target=TARGET, sla=SLA, margin=m)
    assert target.rate_rps == pytest.approx(40 / m.capacity)
    assert sla.tpot_ms == pytest.approx(40 / m.tpot)
    assert margin(model=SURE.model, calibrated=True, confidence=0.5).capacity <= 1.0  # never above the point


def test_json_contract_at_a_confidence(at90: Recommendation, point: Recommendation) -> None:
    assert at90.confidence == 0.9 and point.confidence is None
    data = at90.model_dump(mode="json")
    assert data["confidence"] == 0.9
    for plan in data["plans"]:
        if plan["layout_kind"] == "disaggregated":  # no intervals: the error model has no split pools
            assert plan["low"] is None and plan["high"] is None
            continue
        assert set(plan["low"]) >= {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
        assert set(plan["high"]) >= {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
        assert plan["count"] >= plan["count_at_point_estimate"]
    assert all(p.count_at_point_estimate is None for p in point.plans)


def test_point_counts_are_those_of_the_point_plan(at90: Recommendation, point: Recommendation) -> None:
    by_layout = _counts(point)
    shared = [p for p in at90.plans if layout_key(p) in by_layout]
    assert shared
    for p in shared:
        assert p.count_at_point_estimate == by_layout[layout_key(p)]


def test_explanation_states_both_counts(at90: Recommendation) -> None:
    best = at90.plans[0]
    line = at90.explanation[1]
    assert line.startswith(
        f"Sized at 90% confidence: {best.count_at_point_estimate}x {best.gpu_types} meet the SLA at the point "
        f"estimate; {best.num_gpus} at 90% confidence"
    )


def test_plans_are_restated_at_the_real_target(at90: Recommendation) -> None:
    # Sized on rate / c, reported at the rate asked: served tokens/s = rate x output tokens.
    for p in at90.plans:
        assert p.output_tokens_per_s == pytest.approx(40 * 128)


def test_interval_is_the_named_groups_band(point: Recommendation) -> None:
    p = point.plans[0]
    assert p.interval is not None and p.low is not None and p.high is not None
    group = p.interval.sources["tpot_ms"].group
    quantiles = SURE.model.groups[group]
    assert quantiles.n == p.interval.sources["tpot_ms"].rows
    ends = band(model=SURE.model, path=tuple(group.split("/")), level=0.8)
    assert ends is not None
    assert p.low.tpot_ms == pytest.approx(p.tpot_ms * ends[0])
    assert p.high.tpot_ms == pytest.approx(p.tpot_ms * ends[1])


def test_a_wider_level_gives_a_wider_interval(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    narrow = recommend(
        llama8b, offers, TARGET, sla=SLA, cal=CAL, uncertainty=Uncertainty(model=SURE.model, level=0.5)
    )
    wide = recommend(
        llama8b, offers, TARGET, sla=SLA, cal=CAL, uncertainty=Uncertainty(model=SURE.model, level=0.95)
    )
    n, w = narrow.plans[0], wide.plans[0]
    assert n.low and n.high and w.low and w.high
    ends = [x.tpot_ms for x in (w.low, n.low, n.high, w.high)]
    assert None not in ends
    assert ends == sorted(ends) and ends[0] != ends[1] and ends[2] != ends[3]  # type: ignore[type-var]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    qs=st.lists(st.floats(min_value=0.5, max_value=0.99), min_size=2, max_size=2, unique=True),
    rate=st.sampled_from([5.0, 40.0, 150.0]),
)
def test_count_is_monotone_in_the_confidence(
    llama8b: ModelSpec, offers: list[GpuOffer], qs: list[float], rate: float
) -> None:
    target = TARGET.model_copy(update={"rate_rps": rate})
    lo_q, hi_q = sorted(qs)
    point, lo, hi, at90 = (_rec(llama8b, offers, q, target) for q in (None, lo_q, hi_q, 0.9))
    lo_counts, hi_counts, point_counts = _counts(lo), _counts(hi), _counts(point)
    for key, count in hi_counts.items():  # each layout needs no fewer GPUs at a higher confidence
        if key in lo_counts:
            assert count >= lo_counts[key]
    for p in at90.plans:  # and at 90 % never fewer than at the point estimate (disaggregated plans too)
        assert p.count_at_point_estimate is None or p.num_gpus >= p.count_at_point_estimate
        assert p.count_at_point_estimate is not None or p.layout_kind == "disaggregated"
        if layout_key(p) in point_counts:
            assert p.num_gpus >= point_counts[layout_key(p)]
    costs = [r.plans[0].usd_per_hour or math.inf for r in (point, lo, hi)]
    assert costs == sorted(costs)  # the best plan costs no less at a higher confidence


def _p99_plan(model: ModelSpec) -> tuple[Plan, Workload]:
    offer = resolve.offers(default_catalog(), ["H100-SXM"])
    target = Workload(scenario="rate", input_tokens=512, output_tokens=128, rate_rps=10)
    rec = recommend(model, offer, target, sla=P99_SLA, cal=CAL, uncertainty=SURE)
    return next(p for p in rec.plans if p.layout_kind == "aggregated"), target  # the tail model's replicas


def test_p99_interval_widens_near_capacity(llama8b: ModelSpec) -> None:
    plan, target = _p99_plan(llama8b)
    assert plan.sized_on == "p99" and plan.interval is not None and plan.interval.capacity is not None
    replica = one_replica(llama8b, default_catalog().get_gpu("H100-SXM"), plan.layout, target, CAL)
    capacity = tail_max_rate(replica, input_tokens=512, output_tokens=128, slo=P99_SLA)
    one = plan.layout.with_replicas(1)
    widths = []
    for share in (0.2, 0.9):  # the same replica far from and near its SLA-limited capacity
        at = target.model_copy(update={"rate_rps": capacity * share})
        p = with_intervals(
            plan=plan.model_copy(update={"layout": one}), replica=replica, target=at, uncertainty=SURE
        )
        assert p.low is not None and p.high is not None and p.low.tpot_p99_ms is not None
        high = p.high.tpot_p99_ms if p.high.tpot_p99_ms is not None else math.inf
        widths.append(high / p.low.tpot_p99_ms)
    assert widths[1] > widths[0]


def test_queue_ratio_is_the_time_stretch_far_from_capacity(llama8b: ModelSpec) -> None:
    plan, target = _p99_plan(llama8b)
    replica = one_replica(llama8b, default_catalog().get_gpu("H100-SXM"), plan.layout, target, CAL)
    trickle = target.model_copy(update={"rate_rps": 0.01})
    low, high = queue_ratios(replica=replica, target=trickle, replicas=1, capacity=(0.8, 1.2))
    # At a trickle no request queues: a replica c times as fast is 1/c times as slow, nothing more.
    assert low["ttft_p99_ms"] == pytest.approx(1 / 1.2, rel=0.02)
    assert high["ttft_p99_ms"] == pytest.approx(1 / 0.8, rel=0.02)

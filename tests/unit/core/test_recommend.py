"""``recommend`` end to end on a small search: ordering, SLA, GPU counts, rejections, budget, objectives."""

from __future__ import annotations

import math

import pytest

from gpuplan import service
from gpuplan.catalog import default_catalog
from gpuplan.errors import InfeasibleError
from gpuplan.models import get_model
from gpuplan.models.spec import ModelSpec
from gpuplan.perf.calibration import default_calibration
from gpuplan.perf.layout import Layout
from gpuplan.recommend import GpuOffer, Recommendation, SearchSpace, ServingTarget, Sla, recommend
from gpuplan.recommend.request import Plan
from gpuplan.recommend.search import evaluate
from gpuplan.units import GIB

TARGET = ServingTarget(input_tokens=512, output_tokens=128, rate_rps=5)
SLA = Sla(tpot_ms=50)


@pytest.fixture(scope="module")
def llama8b() -> ModelSpec:
    return get_model("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def offers() -> list[GpuOffer]:
    return service.offers(default_catalog(), ["L4", "H100-SXM"])


@pytest.fixture(scope="module")
def rec(llama8b: ModelSpec, offers: list[GpuOffer]) -> Recommendation:
    return recommend(llama8b, offers, TARGET, sla=SLA)


def _leaders(plans: list[Plan]) -> tuple[list[Plan], list[Plan]]:
    """Split into the first plan of each GPU type and the further layouts (the documented order)."""
    seen: set[str] = set()
    first, rest = [], []
    for p in plans:
        (rest if p.gpu in seen else first).append(p)
        seen.add(p.gpu)
    return first, rest


def test_offers_carry_prices(offers: list[GpuOffer]) -> None:
    assert [o.gpu.id for o in offers] == ["L4", "H100-SXM"]
    assert all(o.usd_per_gpu_hour and o.usd_per_gpu_hour > 0 for o in offers)


def test_plans_sorted_by_cost(rec: Recommendation) -> None:
    assert rec.model == "meta-llama/Llama-3.1-8B"
    assert rec.objective == "cost"
    assert {p.gpu for p in rec.plans} == {"L4", "H100-SXM"}
    costs = [p.usd_per_hour for p in rec.plans]
    assert all(c is not None for c in costs)
    # The winner is the cheapest plan overall.
    assert rec.plans[0].usd_per_hour == min(c for c in costs if c is not None)
    # Each GPU type's best plan comes first, cheapest first; then further layouts, cheapest first.
    first, rest = _leaders(rec.plans)
    assert [p.usd_per_hour for p in first] == sorted(p.usd_per_hour or math.inf for p in first)
    assert [p.usd_per_hour for p in rest] == sorted(p.usd_per_hour or math.inf for p in rest)
    assert rec.explanation and rec.explanation[0].startswith(f"Best: {rec.plans[0].count}x {rec.plans[0].gpu}")
    assert rec.assumptions


def test_each_plan_meets_sla_and_load(rec: Recommendation, offers: list[GpuOffer]) -> None:
    price = {o.gpu.id: o.usd_per_gpu_hour for o in offers}
    for p in rec.plans:
        assert p.tpot_ms <= 50.0
        assert p.count == p.replicas * p.tp * p.pp
        # The target load is served in full: 5 req/s x 128 tokens = 640 tokens/s.
        assert p.requests_per_s == pytest.approx(5.0)
        assert p.output_tokens_per_s == pytest.approx(640.0)
        # Price: GPUs x $/GPU-h; month = 730 h; $/1M tokens = $/h / (tokens/s x 3600) x 1e6.
        assert p.usd_per_hour == pytest.approx(p.count * (price[p.gpu] or 0))
        assert p.usd_per_month == pytest.approx(730 * (p.usd_per_hour or 0))
        assert p.usd_per_million_output_tokens == pytest.approx((p.usd_per_hour or 0) / (640 * 3600) * 1e6)
        assert p.memory_per_gpu_gib <= p.memory_breakdown_gib.capacity


def test_plan_fits_budget_of_memory(rec: Recommendation) -> None:
    for p in rec.plans:
        b = p.memory_breakdown_gib
        assert b.total == pytest.approx(b.weights + b.kv_cache + b.activation + b.overhead)
        assert b.total <= b.capacity


def test_gpu_that_cannot_fit_is_rejected_with_gib() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    offers = service.offers(default_catalog(), ["T4", "H100-SXM"])
    rec = recommend(model, offers, ServingTarget(input_tokens=512, output_tokens=128, rate_rps=1),
                    space=SearchSpace(max_gpus=1))
    assert {p.gpu for p in rec.plans} == {"H100-SXM"}
    assert all(p.count == 1 for p in rec.plans)
    t4 = [r for r in rec.rejected if r.gpu == "T4"]
    assert len(t4) == 1
    assert t4[0].kind == "memory"
    assert "GiB" in t4[0].reason
    assert any(line.startswith("Not T4:") for line in rec.explanation)


def test_impossible_sla_raises_with_nearest_misses(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    with pytest.raises(InfeasibleError) as info:
        recommend(llama8b, offers, TARGET, sla=Sla(tpot_ms=0.1))
    err = info.value
    assert err.exit_code == 2
    assert err.nearest
    assert all("TPOT" in m for m in err.nearest)
    assert "nearest misses" in str(err)
    assert "Llama-3.1-8B" in str(err)


def test_budget_filter(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    cheapest = recommend(llama8b, offers, TARGET, sla=SLA).plans[0].usd_per_hour
    assert cheapest is not None
    budget = cheapest * 1.01
    rec = recommend(llama8b, offers, TARGET, sla=SLA, space=SearchSpace(max_usd_per_hour=budget))
    assert rec.plans
    assert all((p.usd_per_hour or 0) <= budget for p in rec.plans)
    assert rec.plans[0].usd_per_hour == cheapest


def test_budget_below_every_plan_is_infeasible(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    with pytest.raises(InfeasibleError):
        recommend(llama8b, [offers[1]], TARGET, sla=SLA, space=SearchSpace(max_usd_per_hour=0.5))


def test_latency_objective_orders_by_tpot(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    rec = recommend(llama8b, offers, TARGET, sla=SLA, objective="latency")
    assert rec.objective == "latency"
    tpots = [p.tpot_ms for p in rec.plans]
    assert rec.plans[0].tpot_ms == min(tpots)
    first, rest = _leaders(rec.plans)
    assert [p.tpot_ms for p in first] == sorted(p.tpot_ms for p in first)
    assert [p.tpot_ms for p in rest] == sorted(p.tpot_ms for p in rest)
    # The fastest plan is at least as fast as the cheapest one.
    assert rec.plans[0].tpot_ms <= recommend(llama8b, offers, TARGET, sla=SLA).plans[0].tpot_ms


def test_throughput_objective_orders_by_tokens_per_dollar(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    rec = recommend(llama8b, offers, TARGET, sla=SLA, objective="throughput")
    per_dollar = [p.output_tokens_per_s / (p.usd_per_hour or math.inf) for p in rec.plans]
    assert per_dollar[0] == max(per_dollar)


def test_concurrency_target(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    target = ServingTarget(input_tokens=512, output_tokens=128, concurrency=64)
    rec = recommend(llama8b, offers, target, sla=SLA)
    for p in rec.plans:
        assert p.tpot_ms <= 50.0
        assert p.concurrency_per_replica * p.replicas == pytest.approx(64)


def test_serving_target_needs_exactly_one_load() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ServingTarget(input_tokens=1, output_tokens=1)
    with pytest.raises(ValueError, match="exactly one"):
        ServingTarget(input_tokens=1, output_tokens=1, rate_rps=1, concurrency=1)


def test_memory_per_gpu_counts_kv_once(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    plan = evaluate(llama8b, offers[1], Layout(tp=2), TARGET, SLA, SearchSpace(), default_calibration())
    assert isinstance(plan, Plan)
    b = plan.memory_breakdown_gib
    # KV per GPU at TP2: 65,536 B/token x (512 + 128) tokens x running requests, capped at the pool.
    used_kv = min(plan.concurrency_per_replica * 640 * 65_536 / GIB, b.kv_cache)
    assert plan.memory_per_gpu_gib == pytest.approx(b.weights + b.activation + b.overhead + used_kv)


def test_gpu_over_budget_is_rejected_for_budget(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    # A TPOT limit the L4 meets comfortably (~51 ms at batch 1 in FP8): this test is about the budget.
    rec = recommend(llama8b, offers, TARGET, sla=Sla(tpot_ms=80), space=SearchSpace(max_usd_per_hour=2.0))
    assert {p.gpu for p in rec.plans} == {"L4"}
    assert [r.kind for r in rec.rejected if r.gpu == "H100-SXM"] == ["budget"]


def test_nearest_miss_is_the_fastest_layout(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    with pytest.raises(InfeasibleError) as info:
        recommend(llama8b, offers, TARGET, sla=Sla(tpot_ms=0.1))
    tpots = [float(m.split("TPOT ")[1].split(" ms")[0]) for m in info.value.nearest]
    assert tpots[0] == min(tpots)


def test_latency_reason_shows_sub_ms_limit(llama8b: ModelSpec, offers: list[GpuOffer]) -> None:
    with pytest.raises(InfeasibleError) as info:
        recommend(llama8b, offers, TARGET, sla=Sla(tpot_ms=0.1))
    assert "> 0 ms" not in info.value.nearest[0]

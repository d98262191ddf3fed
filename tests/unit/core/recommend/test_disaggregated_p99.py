"""Disaggregated plans under P99 limits and at a confidence (``core/recommend/disaggregated_tail.py``):
the simulated P99s hold, pools only grow from the mean-sized plan, and a confidence never shrinks one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.confidence import LayoutKey, at_margin, layout_key, margin, stricter
from gpuplan.core.recommend.confirm import TAIL_REQUESTS, WARMUP_FRACTION, spec
from gpuplan.core.recommend.disaggregated import disaggregated_plans
from gpuplan.core.recommend.disaggregated_tail import FIRST_TOKEN_DECODE_STEPS_P99
from gpuplan.core.recommend.request import GpuOffer, Plan, Recommendation, SearchSpace
from gpuplan.core.recommend.search import candidate_layouts
from gpuplan.core.sim.config import Disaggregation, SimConfig
from gpuplan.core.sim.metrics import per_request_s
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases import resolve

CAL = default_calibration()
CATALOG = default_catalog()
LLAMA_70B = get_model("meta-llama/Llama-3.1-70B")
LLAMA_8B = get_model("meta-llama/Llama-3.1-8B")
LONG = Workload(scenario="rate", input_tokens=8000, output_tokens=500, rate_rps=20)
TTFT_P99_MS = 900.0
"""Tight enough that the 70B prompts' mean-sized prefill pool (M/D/1 at a mean TTFT of 900 ms) misses
it at the tail: the simulator must grow the prefill pool."""
SPLIT = SearchSpace(max_gpus=512, weight_dtypes=("fp8",), layout_kinds=("disaggregated",))
CHAT = Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=20)
CHAT_SLA = Sla(tpot_ms=60)
SURE = Uncertainty(model=default_error_model())


def _offers(*gpus: str) -> list[GpuOffer]:
    return resolve.offers(CATALOG, list(gpus))


@pytest.fixture(scope="module")
def p99() -> Recommendation:
    return recommend(
        LLAMA_70B, _offers("H200-SXM"), LONG, sla=Sla(ttft_p99_ms=TTFT_P99_MS), space=SPLIT, cal=CAL
    )


def _mean_sized(
    model: ModelSpec, offers: list[GpuOffer], target: Workload, sla: Sla, space: SearchSpace
) -> dict[LayoutKey, Plan]:
    """The analytic (mean-limit) disaggregated plans of ``disaggregated.py``, by layout."""
    layouts = {o.gpu.id: list(candidate_layouts(model, o.gpu, space)) for o in offers}
    plans, _ = disaggregated_plans(model, offers, layouts, target, sla, space, CAL)
    return {layout_key(p): p for p in plans}


def _client_ttft_p99_ms(plan: Plan) -> float:
    """The plan's pools simulated here from scratch: P99 of (prefill TTFT) + KV transfer + 2 P99 decode steps."""
    assert plan.prefill is not None and plan.decode is not None and plan.kv_transfer_ms is not None
    gpu = _offers(plan.gpu)[0].gpu
    context = LONG.input_tokens + LONG.output_tokens
    decode = ReplicaModel.build(LLAMA_70B, gpu, plan.layout.with_replicas(1), context_tokens=context, cal=CAL)
    pre_layout = plan.prefill.to_layout(plan.layout).with_replicas(1)
    prefill = ReplicaModel.build(LLAMA_70B, gpu, pre_layout, context_tokens=context, cal=CAL)
    link = (LONG.input_tokens + 1) * decode.memory.kv_bytes_per_token / (plan.kv_transfer_ms / 1000)
    pools = Disaggregation(
        prefill_replicas=plan.prefill.workers,
        decode_replicas=plan.decode.workers,
        kv_transfer_bytes_per_s=link,
    )
    config = SimConfig(record_timeline=False, warmup_fraction=WARMUP_FRACTION, disaggregation=pools)
    result = simulate(decode, generate(spec(LONG, 20.0, TAIL_REQUESTS)), config, prefill=prefill)
    lat = per_request_s(result)
    keep = np.argsort(result.arrival_s)[int(TAIL_REQUESTS * WARMUP_FRACTION) :]
    ttft, tpot = lat["ttft"][keep] * 1000, lat["tpot"][keep] * 1000
    tpot_p99 = float(np.percentile(tpot, 99, method="inverted_cdf"))
    return float(np.percentile(ttft, 99, method="inverted_cdf")) + plan.kv_transfer_ms + 2 * tpot_p99


def test_a_p99_ttft_limit_holds_on_the_simulator(p99: Recommendation) -> None:
    assert p99.plans
    for plan in p99.plans:
        assert (
            plan.layout_kind == "disaggregated" and plan.sized_on == "p99" and plan.p99_source == "simulator"
        )
        assert plan.ttft_p99_ms is not None and plan.ttft_p99_ms <= TTFT_P99_MS
    best = p99.plans[0]
    assert FIRST_TOKEN_DECODE_STEPS_P99 == 2.0  # the re-simulation below counts two decode steps
    assert _client_ttft_p99_ms(best) == pytest.approx(best.ttft_p99_ms, rel=0.02)
    assert _client_ttft_p99_ms(best) <= TTFT_P99_MS


def test_pools_only_grow_from_the_mean_sized_plan(p99: Recommendation) -> None:
    # The mean-sized version: the same search with a mean TTFT limit at the P99 limit (a P99 is never
    # below its mean). A TTFT-only limit grows prefill workers only; the decode pool stays as sized.
    means = _mean_sized(LLAMA_70B, _offers("H200-SXM"), LONG, Sla(ttft_ms=TTFT_P99_MS), SPLIT)
    grown = 0
    for plan in p99.plans:
        seed = means[layout_key(plan)]
        assert plan.prefill and plan.decode and seed.prefill and seed.decode
        assert plan.prefill.workers >= seed.prefill.workers and plan.num_gpus >= seed.num_gpus
        assert plan.decode.workers == seed.decode.workers
        grown += plan.prefill.workers > seed.prefill.workers
        assert plan.p99_pools is not None
    assert grown  # the limit is tight enough that the tail, not the mean, sets some prefill pool
    lines = [line for line in p99.explanation if "sized on P99" in line]
    assert any("prefill " in line and "P99 TTFT" in line and "->" in line for line in lines)


def _split(q: float | None, mixed: bool = False, sla: Sla = CHAT_SLA) -> Recommendation:
    space = SPLIT.model_copy(update={"mixed_pools": mixed})
    sure = SURE.model_copy(update={"confidence": q})
    offers = _offers("H100-SXM", "H200-SXM", "L40S")
    return recommend(LLAMA_8B, offers, CHAT, sla=sla, space=space, cal=CAL, uncertainty=sure)


def test_a_confidence_sizes_each_pool_at_its_gpus_margin() -> None:
    point, at90 = _split(None), _split(0.9)
    by_key = {layout_key(p): p for p in point.plans}
    shared = [p for p in at90.plans if layout_key(p) in by_key]
    assert shared
    for plan in at90.plans:
        assert plan.count_at_point_estimate is None or plan.num_gpus >= plan.count_at_point_estimate
    for plan in shared:
        ref = by_key[layout_key(plan)]
        assert plan.count_at_point_estimate == ref.num_gpus and plan.num_gpus >= ref.num_gpus
        # the Q-sized pools: the search at rate / c and limits / f of the pool's GPU (confidence.py)
        offer = _offers(plan.gpu)[0]
        m = margin(model=SURE.model, calibrated=CAL.is_fitted(offer.gpu.family), confidence=0.9)
        target, sla = at_margin(target=CHAT, sla=CHAT_SLA, margin=m)
        q_sized = _mean_sized(LLAMA_8B, [offer], target, sla, SPLIT)[layout_key(plan)]
        assert (
            plan.prefill and plan.decode and ref.prefill and ref.decode and q_sized.prefill and q_sized.decode
        )
        assert plan.decode.workers == max(q_sized.decode.workers, ref.decode.workers)
        assert plan.prefill.workers == max(q_sized.prefill.workers, ref.prefill.workers)
        assert plan.output_tokens_per_s == pytest.approx(20 * 300)  # restated at the rate asked


def test_mixed_pools_take_the_stricter_margin() -> None:
    at90 = _split(0.9, mixed=True)
    fitted = {g: CAL.is_fitted(_offers(g)[0].gpu.family) for g in ("H100-SXM", "H200-SXM", "L40S")}
    assert len(set(fitted.values())) == 2  # both evidence levels are in the offers
    across = [p for p in at90.plans if p.prefill and fitted[p.prefill.gpu] != fitted[p.gpu]]
    assert across
    both = stricter(*(margin(model=SURE.model, calibrated=f, confidence=0.9) for f in (True, False)))
    target, sla = at_margin(target=CHAT, sla=CHAT_SLA, margin=both)
    space = SPLIT.model_copy(update={"mixed_pools": True})
    q_sized = _mean_sized(LLAMA_8B, _offers("H100-SXM", "H200-SXM", "L40S"), target, sla, space)
    for plan in across:
        ref = q_sized[layout_key(plan)]
        assert plan.prefill and ref.prefill and plan.decode and ref.decode
        assert plan.prefill.workers >= ref.prefill.workers and plan.decode.workers >= ref.decode.workers


@settings(max_examples=4, deadline=None)
@given(qs=st.lists(st.floats(min_value=0.5, max_value=0.95), min_size=2, max_size=2, unique=True))
def test_disaggregated_counts_are_monotone_in_the_confidence(qs: list[float]) -> None:
    lo_q, hi_q = sorted(qs)
    point, lo, hi = (_split(q, mixed=True) for q in (None, lo_q, hi_q))
    lo_counts = {layout_key(p): p.num_gpus for p in lo.plans}
    point_counts = {layout_key(p): p.num_gpus for p in point.plans}
    for p in hi.plans:
        if layout_key(p) in lo_counts:
            assert p.num_gpus >= lo_counts[layout_key(p)]
        if layout_key(p) in point_counts:
            assert p.num_gpus >= point_counts[layout_key(p)] == p.count_at_point_estimate
    costs = [r.plans[0].usd_per_hour or 0.0 for r in (point, lo, hi)]
    assert costs == sorted(costs)


def test_p99_at_a_confidence_is_simulated_at_the_real_target() -> None:
    rec = _split(0.9, sla=Sla(tpot_p99_ms=60))
    assert rec.plans and rec.confidence == 0.9
    for plan in rec.plans:
        assert plan.sized_on == "p99" and plan.p99_source == "simulator"
        assert plan.tpot_p99_ms is not None and plan.tpot_p99_ms <= 60
        assert plan.low is None  # no intervals: the error model is fitted on aggregated deployments
    assert not any("not searched" in a for a in rec.assumptions)

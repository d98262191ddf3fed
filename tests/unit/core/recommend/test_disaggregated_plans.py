"""Disaggregated prefill/decode plans: where they must win, where they must lose, and their numbers
checked against the formulas of ``core/recommend/disaggregated.py``."""

from __future__ import annotations

import math

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import InfeasibleError, UserInputError
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.kv_transfer import KvTransport
from gpuplan.core.perf.scenarios import mean_context
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.disaggregated import FIRST_TOKEN_DECODE_STEPS
from gpuplan.core.recommend.layout_kinds import scope, versus
from gpuplan.core.recommend.request import GpuOffer, Plan, Recommendation, SearchSpace
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

CAL = default_calibration()
CATALOG = default_catalog()
LONG = Workload(scenario="rate", input_tokens=8000, output_tokens=500, rate_rps=20)
LONG_SLA = Sla(ttft_ms=2000, tpot_ms=20)
SHORT = Workload(scenario="rate", input_tokens=200, output_tokens=200, rate_rps=1)
SHORT_SLA = Sla(ttft_ms=500, tpot_ms=50)


def _offers(*gpus: str) -> list[GpuOffer]:
    return resolve.offers(CATALOG, list(gpus))


def _rec(
    model: str, target: Workload, sla: Sla, *kinds: str, gpus: tuple[str, ...] = ("H200-SXM",)
) -> Recommendation:
    space = SearchSpace(max_gpus=512, weight_dtypes=("fp8",), layout_kinds=kinds)
    return recommend(get_model(model), _offers(*gpus), target, sla=sla, space=space, cal=CAL)


def test_long_prompts_and_a_tight_tpot_make_disaggregation_win() -> None:
    both = _rec("meta-llama/Llama-3.1-70B", LONG, LONG_SLA, "aggregated", "disaggregated")
    alone = _rec("meta-llama/Llama-3.1-70B", LONG, LONG_SLA, "aggregated")
    best, together = both.plans[0], alone.plans[0]
    assert best.layout_kind == "disaggregated" and together.layout_kind == "aggregated"
    assert best.usd_per_hour is not None and together.usd_per_hour is not None
    assert best.usd_per_hour < 0.8 * together.usd_per_hour  # prompts take a large share of a replica
    assert (together.prefill_share or 0) > 0.3
    assert any(
        line.startswith("Disaggregated ") and " beats aggregated " in line for line in both.explanation
    )


def test_short_prompts_at_a_low_rate_make_disaggregation_lose() -> None:
    both = _rec(
        "meta-llama/Llama-3.1-8B", SHORT, SHORT_SLA, "aggregated", "disaggregated", gpus=("H100-SXM",)
    )
    split = _rec("meta-llama/Llama-3.1-8B", SHORT, SHORT_SLA, "disaggregated", gpus=("H100-SXM",))
    assert both.plans[0].layout_kind == "aggregated" and both.plans[0].num_gpus == 1
    assert split.plans[0].num_gpus >= 2  # a prefill worker and a decode worker at least
    assert any(line.startswith("Aggregated ") for line in both.explanation)


def _split_plan() -> Plan:
    plan = _rec("meta-llama/Llama-3.1-70B", LONG, LONG_SLA, "disaggregated").plans[0]
    assert plan.prefill is not None and plan.decode is not None and plan.kv_transfer_ms is not None
    return plan


def test_pools_add_up_and_the_decode_batch_obeys_littles_law() -> None:
    plan = _split_plan()
    assert plan.prefill is not None and plan.decode is not None
    assert (
        plan.num_gpus == plan.prefill.count + plan.decode.count == plan.layout.num_gpus + plan.prefill.count
    )
    assert plan.usd_per_hour == pytest.approx(
        (plan.prefill.usd_per_hour or 0) + (plan.decode.usd_per_hour or 0)
    )
    per_worker_rps = 20 / plan.decode.workers
    assert plan.concurrency_per_replica == pytest.approx(per_worker_rps * 500 * plan.tpot_ms / 1e3, rel=1e-3)
    assert plan.tpot_ms <= 20 and plan.ttft_ms <= 2000
    assert plan.output_tokens_per_s == pytest.approx(20 * 500)


def test_ttft_is_the_md1_prefill_queue_plus_transfer_plus_first_decode_steps() -> None:
    plan = _split_plan()
    assert plan.prefill is not None
    gpu = CATALOG.get_gpu(plan.prefill.gpu)
    layout = plan.prefill.to_layout(plan.layout).with_replicas(1)
    step = ReplicaModel.build(
        get_model("meta-llama/Llama-3.1-70B"), gpu, layout, context_tokens=8001, cal=CAL
    ).step
    alone = step.lone_prefill_s(8000)
    busy = plan.prefill.busy_share * plan.prefill.workers / 20  # rho = lambda_p * s  =>  s
    rho = plan.prefill.busy_share
    queue = rho * busy / (2 * (1 - rho))
    expected = (
        alone + queue + (plan.kv_transfer_ms or 0) / 1e3 + FIRST_TOKEN_DECODE_STEPS * plan.tpot_ms / 1e3
    )
    assert plan.ttft_ms / 1e3 == pytest.approx(expected, rel=1e-6)
    assert rho <= SearchSpace().headroom + 1e-9


def test_a_json_round_trip_keeps_both_pools() -> None:
    plan = _split_plan()
    data = plan.model_dump(mode="json")
    assert data["count"] == plan.num_gpus and data["layout_kind"] == "disaggregated"
    back = Plan.model_validate(data)
    assert back.num_gpus == plan.num_gpus and back.prefill == plan.prefill and back.decode == plan.decode
    assert (back.layout.tp, back.layout.replicas, back.layout.weight_dtype) == (
        plan.layout.tp,
        plan.layout.replicas,
        plan.layout.weight_dtype,
    )


def test_pools_share_a_gpu_type_unless_mixed_pools_are_allowed() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    offers = _offers("H100-SXM", "H200-SXM", "B200")
    space = SearchSpace(max_gpus=512, weight_dtypes=("fp8",), layout_kinds=("disaggregated",))
    same = recommend(model, offers, LONG, sla=LONG_SLA, space=space, cal=CAL)
    assert all(p.prefill is not None and p.prefill.gpu == p.gpu for p in same.plans)
    mixed = recommend(
        model, offers, LONG, sla=LONG_SLA, space=space.model_copy(update={"mixed_pools": True}), cal=CAL
    )
    assert any(p.prefill is not None and p.prefill.gpu != p.gpu for p in mixed.plans)
    assert mixed.plans[0].usd_per_hour is not None and same.plans[0].usd_per_hour is not None
    assert mixed.plans[0].usd_per_hour <= same.plans[0].usd_per_hour  # a superset of pairings


def test_nvlink_keeps_both_pools_on_one_nvlink_fabric() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    space = SearchSpace(
        max_gpus=512,
        weight_dtypes=("fp8",),
        layout_kinds=("disaggregated",),
        kv_transport=KvTransport(kind="nvlink"),
    )
    light = LONG.model_copy(update={"rate_rps": 1.0})
    rec = recommend(model, _offers("H200-SXM"), light, sla=LONG_SLA, space=space, cal=CAL)
    assert rec.plans
    for p in rec.plans:
        assert p.prefill is not None and p.decode is not None
        assert p.prefill.count + p.decode.count <= 8  # H200 HGX: 8 GPUs on one NVSwitch fabric
    with pytest.raises(InfeasibleError):  # 20 req/s of 8,000-token prompts need more than one node
        recommend(model, _offers("H200-SXM"), LONG, sla=LONG_SLA, space=space, cal=CAL)


def test_nvlink_is_refused_on_gpus_without_an_nvlink_fabric() -> None:
    space = SearchSpace(layout_kinds=("disaggregated",), kv_transport=KvTransport(kind="nvlink"))
    model = get_model("meta-llama/Llama-3.1-8B")
    for gpu, link in (("L40S", "pcie"), ("MI300X", "xgmi")):
        with pytest.raises(InfeasibleError, match=f"nvlink needs an NVLink switch fabric; {gpu} has {link}"):
            recommend(model, _offers(gpu), SHORT, sla=SHORT_SLA, space=space, cal=CAL)


def test_disaggregation_is_kept_with_p99_limits_and_a_confidence() -> None:
    space, sla = SearchSpace(), Sla(ttft_p99_ms=800, tpot_p99_ms=60)
    for at_confidence in (False, True):
        kept, lines = scope(space, SHORT, sla, at_confidence=at_confidence)
        assert kept.layout_kinds == space.layout_kinds
        assert not any("not searched" in line for line in lines)
        assert any("confirmed on the simulator" in line for line in lines)
        assert any("stricter" in line for line in lines) is at_confidence
    split = SearchSpace(layout_kinds=("disaggregated",))
    assert scope(split, SHORT, sla, at_confidence=True)[0].layout_kinds == ("disaggregated",)


def test_disaggregation_is_dropped_with_a_reason_where_it_cannot_be_sized() -> None:
    model = get_model("meta-llama/Llama-3.1-8B")
    closed = SHORT.model_copy(update={"scenario": "concurrency", "rate_rps": None, "concurrency": 4.0})
    with pytest.raises(
        UserInputError, match=r"--layouts disaggregated cannot be searched with a concurrency target"
    ):
        recommend(
            model, _offers("H100-SXM"), closed, space=SearchSpace(layout_kinds=("disaggregated",)), cal=CAL
        )
    tgi = SearchSpace(engine="tgi")
    rec = recommend(model, _offers("H100-SXM"), SHORT, sla=SHORT_SLA, space=tgi, cal=CAL)
    assert all(p.layout_kind == "aggregated" for p in rec.plans)
    assert any("engine tgi" in a for a in rec.assumptions)


def test_a_gpu_too_small_for_the_model_is_a_memory_miss() -> None:
    space = SearchSpace(
        max_gpus=512,
        weight_dtypes=("fp8",),
        layout_kinds=("disaggregated",),
        tp_options=(1,),
        pp_options=(1,),
    )
    model = get_model("meta-llama/Llama-3.1-70B")
    rec = recommend(model, _offers("H200-SXM", "RTX-4090"), LONG, sla=Sla(tpot_ms=60), space=space, cal=CAL)
    small = [r for r in rec.rejected if r.gpu == "RTX-4090"]
    assert (
        small
        and small[0].kind == "memory"
        and small[0].reason.startswith("disaggregated: no decode layout holds")
    )
    assert math.isfinite(rec.plans[0].ttft_ms) and mean_context(LONG) == 8250


def test_the_kv_link_is_never_loaded_past_its_capacity() -> None:
    """32,000-token prompts over TCP: Llama-3.1-8B's fp8 KV is 32 layers × 8 heads × 128 ×
    2 × 1 B = 65,536 B per token, 2.10 GB a prompt, 0.336 s on one GPU's 50 Gb/s link."""
    model = get_model("meta-llama/Llama-3.1-8B")
    target = Workload(scenario="rate", input_tokens=32000, output_tokens=16, rate_rps=20)
    space = SearchSpace(
        max_gpus=512,
        weight_dtypes=("fp8",),
        layout_kinds=("disaggregated",),
        kv_transport=KvTransport(kind="tcp"),
    )
    rec = recommend(
        model, _offers("H100-SXM"), target, sla=Sla(ttft_ms=5000, tpot_ms=50), space=space, cal=CAL
    )
    link_bytes_per_s = 50e9 / 8
    prompt_bytes = 32 * 8 * 128 * 2 * 32000
    for p in rec.plans:
        assert p.prefill is not None and p.decode is not None
        for pool in (p.prefill, p.decode):
            per_gpu_s = prompt_bytes / pool.tp / link_bytes_per_s
            assert 20 / (pool.workers * pool.attention_dp) * per_gpu_s < 0.9, pool
        assert (
            p.kv_transfer_ms is not None
            and p.kv_transfer_ms >= prompt_bytes / p.decode.tp / link_bytes_per_s * 1e3
        )


def test_vllm_pairs_decode_tp_multiples_of_the_prefill_tp() -> None:
    space = SearchSpace(
        max_gpus=512, weight_dtypes=("fp8",), layout_kinds=("disaggregated",), mixed_pools=True
    )
    model = get_model("meta-llama/Llama-3.1-70B")
    rec = recommend(model, _offers("MI300X", "MI325X", "H200-SXM"), LONG, sla=LONG_SLA, space=space, cal=CAL)
    assert rec.plans
    for p in rec.plans:
        assert p.prefill is not None and p.decode is not None
        assert p.decode.tp % p.prefill.tp == 0, (p.prefill, p.decode)


def test_a_cached_prefix_shortens_the_disaggregated_prefill() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    light = LONG.model_copy(update={"rate_rps": 1.0})
    cached = light.model_copy(update={"prefix_cache_hit_rate": 0.9})
    space = SearchSpace(max_gpus=512, weight_dtypes=("fp8",), layout_kinds=("disaggregated",))
    plain = recommend(model, _offers("H100-SXM"), light, sla=Sla(tpot_ms=40), space=space, cal=CAL).plans[0]
    hit = recommend(model, _offers("H100-SXM"), cached, sla=Sla(tpot_ms=40), space=space, cal=CAL).plans[0]
    assert plain.ttft_ms is not None and hit.ttft_ms is not None
    assert hit.ttft_ms < 0.5 * plain.ttft_ms  # 800 of 8,000 tokens computed


def test_a_count_rejection_names_the_smallest_disaggregated_plan() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    wide = SearchSpace(max_gpus=512, weight_dtypes=("fp8",), layout_kinds=("disaggregated",))
    fewest = min(
        p.num_gpus
        for p in recommend(model, _offers("H200-SXM"), LONG, sla=LONG_SLA, space=wide, cal=CAL).plans
    )
    narrow = wide.model_copy(update={"max_gpus": fewest - 1})
    with pytest.raises(InfeasibleError, match=f"disaggregated: needs {fewest} GPUs > max {fewest - 1}"):
        recommend(model, _offers("H200-SXM"), LONG, sla=LONG_SLA, space=narrow, cal=CAL)


def test_a_winner_that_costs_more_is_not_said_to_beat_by_a_negative_share() -> None:
    """Ranked on latency, a dearer plan can lead: the line says it costs more, never "by -178%"."""
    model = get_model("meta-llama/Llama-3.1-70B")
    space = SearchSpace(max_gpus=512, weight_dtypes=("fp8",))
    rec = recommend(model, _offers("H200-SXM"), LONG, sla=LONG_SLA, space=space, cal=CAL)
    split = next(p for p in rec.plans if p.layout_kind == "disaggregated")
    together = next(p for p in rec.plans if p.layout_kind == "aggregated")
    dear, cheap = (
        (split, together) if (split.usd_per_hour or 0) > (together.usd_per_hour or 0) else (together, split)
    )
    assert dear.usd_per_hour is not None and cheap.usd_per_hour is not None
    (line,) = versus([dear, cheap])
    extra = (dear.usd_per_hour / cheap.usd_per_hour - 1) * 100
    assert f"at {extra:.0f}% more cost" in line and " by -" not in line
    assert f"TPOT {dear.tpot_ms:.1f} vs {cheap.tpot_ms:.1f} ms" in line


def test_disaggregation_flags_without_disaggregated_plans_are_named() -> None:
    model = get_model("meta-llama/Llama-3.1-8B")
    space = SearchSpace(layout_kinds=("aggregated",), kv_transport=KvTransport(kind="tcp"))
    rec = recommend(model, _offers("H100-SXM"), SHORT, sla=SHORT_SLA, space=space, cal=CAL)
    assert any("shape disaggregated plans only; none was searched" in a for a in rec.assumptions)
    plain = recommend(
        model,
        _offers("H100-SXM"),
        SHORT,
        sla=SHORT_SLA,
        space=SearchSpace(layout_kinds=("aggregated",)),
        cal=CAL,
    )
    assert not any("shape disaggregated plans only" in a for a in plain.assumptions)

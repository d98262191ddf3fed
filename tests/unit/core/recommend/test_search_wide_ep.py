"""The search offers wide expert parallelism (TP-1 attention ranks, EP over whole nodes) for MoE models
only, within max_gpus, and a wide-EP plan wins where TP8's replicated weights leave little KV."""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.recommend.request import GpuOffer, SearchSpace
from gpuplan.core.recommend.search import candidate_layouts, rank, search
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

H200 = default_catalog().get_gpu("H200-SXM")
DSV3 = get_model("deepseek-ai/DeepSeek-V3")


def _wide(model_id: str, max_gpus: int) -> list[tuple[int, int, int]]:
    space = SearchSpace(weight_dtypes=("fp8",), max_gpus=max_gpus, engine="sglang")
    return [
        (layout.tp, layout.attention_dp, layout.ep)
        for layout in candidate_layouts(get_model(model_id), H200, space)
        if layout.attention_dp > 1
    ]


def test_wide_ep_candidates_span_one_two_four_nodes_within_max_gpus() -> None:
    assert _wide("deepseek-ai/DeepSeek-V3", 64) == [(1, 8, 8), (1, 16, 16), (1, 32, 32)]
    assert _wide("deepseek-ai/DeepSeek-V3", 16) == [(1, 8, 8), (1, 16, 16)]
    assert _wide("mistralai/Mixtral-8x7B-v0.1", 64) == [(1, 8, 8)]  # EP cannot exceed its 8 experts
    assert _wide("meta-llama/Llama-3.1-8B", 64) == []


def test_a_wide_ep_plan_is_the_cheapest_at_high_load() -> None:
    # 20 req/s of 2,000-in / 500-out at TPOT 50 ms: TP8 keeps ~78 GiB of weights on every GPU, EP32 ~36 GiB,
    # so the EP32 replica holds far larger batches and needs fewer GPUs for the same load.
    target = Workload(scenario="rate", input_tokens=2000, output_tokens=500, rate_rps=20)
    space = SearchSpace(weight_dtypes=("fp8",), max_gpus=64, engine="sglang", layout_kinds=("aggregated",))
    plans, _ = search(
        DSV3,
        [GpuOffer(gpu=H200, usd_per_gpu_hour=3.0)],
        target,
        Sla(ttft_ms=3000, tpot_ms=50),
        space,
        cal=default_calibration(),
    )
    best = rank(plans, "cost")[0]
    assert (best.layout.attention_dp, best.layout.ep, best.layout.num_gpus) == (32, 32, 32)
    tp8 = [p for p in plans if p.layout.tp == 8 and p.layout.attention_dp == 1]
    assert tp8 and min(p.layout.num_gpus for p in tp8) > best.layout.num_gpus
    assert best.tpot_ms <= 50

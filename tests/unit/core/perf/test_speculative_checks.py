"""Speculative decoding that cannot run on its target is refused (``check_speculative``), and the
search's wide-EP layouts carry the speculation like the others."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.speculative import Speculative, check_speculative
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.request import Plan, SearchSpace
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve


def test_mtp_needs_a_model_with_mtp_layers() -> None:
    check_speculative(Speculative.model_validate({"method": "mtp"}), get_model("deepseek-ai/DeepSeek-V3"))
    with pytest.raises(ValueError, match=r"mtp needs a model with multi-token-prediction layers"):
        check_speculative(Speculative.model_validate({"method": "mtp"}), get_model("meta-llama/Llama-3.1-8B"))


def test_a_draft_model_shares_the_targets_vocabulary() -> None:
    target = get_model("meta-llama/Llama-3.1-70B")
    check_speculative(
        Speculative.model_validate({"method": "draft", "draft_model": get_model("meta-llama/Llama-3.2-1B")}),
        target,
    )
    qwen = get_model("Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(ValueError, match=r"151,936-token vocabulary and meta-llama/Llama-3.1-70B 128,256"):
        check_speculative(Speculative.model_validate({"method": "draft", "draft_model": qwen}), target)


def test_wide_ep_plans_carry_the_speculation() -> None:
    """DeepSeek-V3 with one MTP module (α 0.85, k 1: τ = 1.85 tokens per verify step) decodes faster."""
    model = get_model("deepseek-ai/DeepSeek-V3")
    target = Workload(scenario="rate", input_tokens=4000, output_tokens=500, rate_rps=5)
    offers = resolve.offers(default_catalog(), ["B200"])
    plain = SearchSpace(weight_dtypes=("fp8",), layout_kinds=("aggregated",))
    mtp = plain.model_copy(update={"speculative": Speculative.model_validate({"method": "mtp"})})
    cal, sla = default_calibration(), Sla(ttft_ms=3000, tpot_ms=50)
    base = recommend(model, offers, target, sla=sla, space=plain, cal=cal).plans
    fast = recommend(model, offers, target, sla=sla, space=mtp, cal=cal).plans
    wide = [p for p in fast if p.layout.attention_dp > 1]
    assert wide and all(p.layout.speculative == mtp.speculative for p in fast)

    def shape(p: Plan) -> tuple[int, int, int, str]:
        return p.layout.tp, p.layout.ep, p.layout.attention_dp, p.layout.weight_dtype.name

    same = [p for p in base if shape(p) == shape(wide[0])]
    assert same and wide[0].tpot_ms < same[0].tpot_ms

"""Engine facts that change batching: vLLM V0 runs MLA models on whole prompts (no chunked prefill)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.engine_profiles import (
    VLLM,
    VLLM_V0_MIN_BATCHED_TOKENS,
    get_engine,
    unchunked_prefill_tokens,
)
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import FUSED_MOE_CHUNK_TOKENS, SIXTEEN_BIT, activation_peak_bytes
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.simulator import replica_limits, simulate
from gpuplan.core.sim.workload import Requests
from gpuplan.data.bundled_calibration import default_calibration

DEEPSEEK = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize(
    ("engine", "version", "model", "tokens"),
    [("vllm", "0.7.4.dev181", DEEPSEEK, 163_840), ("vllm", "0.10.1", DEEPSEEK, None),
     ("vllm", None, DEEPSEEK, None), ("sglang", "0.4.3", DEEPSEEK, None),
     ("vllm", "0.7.3", "meta-llama/Llama-3.1-8B", None)],
)  # fmt: skip
def test_only_vllm_v0_on_latent_attention_prefills_whole_prompts(
    engine: str, version: str | None, model: str, tokens: int | None
) -> None:
    """V0's budget is max(max_model_len, 2048) at vLLM's default length: DeepSeek-V3's 163,840."""
    assert (
        unchunked_prefill_tokens(engine=get_engine(engine), version=version, model=get_model(model)) == tokens
    )


def test_the_whole_prompt_budget_is_never_below_v0s_floor() -> None:
    short = get_model(DEEPSEEK).model_copy(update={"max_position_embeddings": 1024})
    assert unchunked_prefill_tokens(engine=VLLM, version="0.7.3", model=short) == VLLM_V0_MIN_BATCHED_TOKENS


def test_routed_expert_outputs_count_up_to_the_fused_moe_chunk() -> None:
    """Above 64 Ki tokens only the (M, top_k, hidden) buffer stops growing: the step's slope drops by
    exactly top_k × hidden 16-bit elements per token."""
    model = get_model(DEEPSEEK)
    assert model.moe is not None

    def slope(lo: int) -> float:
        at = [activation_peak_bytes(model, batched_tokens=n, max_seqs=256, tp=8) for n in (lo, lo + 1024)]
        return (at[1] - at[0]) / 1024

    routed = model.moe.top_k * model.hidden_size * SIXTEEN_BIT
    assert slope(8192) - slope(FUSED_MOE_CHUNK_TOKENS + 8192) == pytest.approx(routed)


def _deepseek(version: str) -> ReplicaModel:
    return ReplicaModel.build(
        get_model(DEEPSEEK),
        default_catalog().get_gpu("H200-SXM"),
        Layout(tp=8, weight_dtype="fp8", engine_version=version),
        context_tokens=4000,
        cal=default_calibration(),
    )


def _wave_ttft_ms(version: str, chunked: bool | None = None) -> np.ndarray:
    """TTFT of eight 3,200-token prompts arriving together on 8×H200 DeepSeek-V3 FP8."""
    trace = Requests(np.zeros(8), np.full(8, 3200, dtype=np.int64), np.full(8, 8, dtype=np.int64))
    run = simulate(_deepseek(version), trace, SimConfig(record_timeline=False, chunked_prefill=chunked))
    return (run.first_token_s - run.arrival_s) * 1e3


def test_v0_gives_a_wave_of_prompts_one_first_token_time_and_v1_staggers_them() -> None:
    """Whole prompts share one prefill step, so a wave's first tokens come together (the measured vLLM
    0.7.4 DeepSeek sweep: TTFT p99 / p50 = 1.04 at concurrency 8); chunks of 8,192 tokens stagger
    them over four steps. (The first arrival starts a step alone: the engine is idle when it comes.)"""
    whole = _wave_ttft_ms("0.7.4")
    chunked = _wave_ttft_ms("0.10.1")
    assert whole.max() == pytest.approx(float(np.median(whole)))
    assert chunked.max() > 1.25 * float(np.median(chunked))


def test_a_stated_chunked_prefill_overrides_the_engines_own() -> None:
    """Forcing chunks on V0's whole-prompt layout chunks at the engine's chunk size, as V1 does."""
    forced = _wave_ttft_ms("0.7.4", chunked=True)
    assert forced.max() > 1.25 * float(np.median(forced))
    replica = _deepseek("0.7.4")
    chunks = replica_limits(replica, SimConfig(chunked_prefill=True))
    assert chunks.chunked and chunks.max_tokens == replica.step.chunk_tokens < 163_840


def test_whole_prompt_layouts_run_without_prefix_caching() -> None:
    """vLLM PR #12642 turned prefix caching off with chunked prefill on MLA models."""
    limits = replica_limits(_deepseek("0.7.4"), SimConfig(prefix_cache_hit_rate=0.5))
    assert not limits.chunked and limits.max_tokens == 163_840 and limits.hit_rate == 0.0
    assert replica_limits(_deepseek("0.10.1"), SimConfig(prefix_cache_hit_rate=0.5)).hit_rate == 0.5

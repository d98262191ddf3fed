"""KV-cache elements and FLOPs: hand-checkable values and window handling."""

from __future__ import annotations

import pytest

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import UserInputError
from gpuplan.core.model.arith import (
    attention_flops_per_token,
    decode_flops_per_token,
    kv_elements_for_sequence,
    kv_elements_per_token,
    matmul_flops_per_token,
    param_counts,
    prefill_flops,
    training_flops_per_token,
)


@pytest.mark.parametrize(
    ("hf_id", "elements"),
    [
        ("meta-llama/Llama-3.1-8B", 2 * 32 * 8 * 128),
        ("meta-llama/Llama-2-7b-hf", 2 * 32 * 32 * 128),
        ("deepseek-ai/DeepSeek-V3", 61 * (512 + 64)),
        ("moonshotai/Kimi-K2-Instruct", 61 * (512 + 64)),
        ("tiiuae/falcon-7b", 2 * 32 * 1 * 64),
        ("Qwen/Qwen3-8B", 2 * 36 * 8 * 128),  # head_dim 128 from the config
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", 2 * 40 * 8 * 128),  # head_dim ≠ 5120/32
        ("google/gemma-2-27b", 2 * 46 * 16 * 128),  # head_dim 128, hidden/heads = 144
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 6 * 2 * 2 * 128),  # attention blocks only
        ("megatron/gpt-7.5b-2021", 2 * 36 * 4096),  # heads unknown: MHA, heads·head_dim = hidden
        ("THUDM/glm-4-9b-chat", 2 * 40 * 2 * 128),
    ],
)
def test_kv_elements_per_token(hf_id: str, elements: int) -> None:
    assert kv_elements_per_token(get_model(hf_id)) == elements


def test_llama31_8b_kv_bytes_at_bf16() -> None:
    assert kv_elements_per_token(get_model("meta-llama/Llama-3.1-8B")) * 2 == 131_072


def test_encoder_has_no_kv_cache() -> None:
    spec = get_model("bert-large-uncased")
    assert spec.kv_groups == ()
    assert kv_elements_per_token(spec) == 0


def test_gpt_oss_sliding_groups() -> None:
    spec = get_model("openai/gpt-oss-20b")
    windows = sorted((g.window_tokens or 0, g.num_layers) for g in spec.kv_groups)
    assert windows == [(0, 12), (128, 12)]
    per_layer = 2 * 8 * 64
    assert kv_elements_per_token(spec) == 24 * per_layer
    assert kv_elements_for_sequence(spec, tokens=100) == 24 * per_layer * 100
    assert kv_elements_for_sequence(spec, tokens=10_000) == 12 * per_layer * 10_000 + 12 * per_layer * 128


def test_gemma3_five_local_per_global() -> None:
    spec = get_model("google/gemma-3-12b-it")
    groups = {g.window_tokens: g.num_layers for g in spec.kv_groups}
    assert groups == {None: 8, 1024: 40}


def test_gemma2_alternates_and_phi3_windows_every_layer() -> None:
    gemma = {g.window_tokens: g.num_layers for g in get_model("google/gemma-2-9b").kv_groups}
    assert gemma == {None: 21, 4096: 21}
    phi3 = get_model("microsoft/Phi-3-mini-4k-instruct").kv_groups
    assert [(g.num_layers, g.window_tokens) for g in phi3] == [(32, 2047)]
    assert get_model("Qwen/Qwen2-7B").kv_groups[0].window_tokens is None  # use_sliding_window false


def test_llama4_chunked_layers_are_windowed() -> None:
    spec = get_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    groups = {g.window_tokens: g.num_layers for g in spec.kv_groups}
    assert groups == {None: 12, 8192: 36}


def test_matmul_flops_are_2n_without_the_input_embedding() -> None:
    spec = get_model("meta-llama/Llama-3.1-8B")
    counts = param_counts(spec)
    assert matmul_flops_per_token(spec) == 2 * (counts.total - counts.embedding)


def test_tied_head_still_costs_a_matmul() -> None:
    spec = get_model("meta-llama/Llama-3.2-1B")
    counts = param_counts(spec)
    assert counts.lm_head == 0
    assert matmul_flops_per_token(spec) == 2 * (counts.total - counts.embedding + 128_256 * 2048)


def test_moe_flops_use_active_params() -> None:
    spec = get_model("mistralai/Mixtral-8x7B-v0.1")
    counts = param_counts(spec)
    assert matmul_flops_per_token(spec) == 2 * (counts.active - counts.embedding)


def test_attention_flops_per_token() -> None:
    spec = get_model("meta-llama/Llama-3.1-8B")
    assert attention_flops_per_token(spec, context_tokens=1000) == 32 * 2 * 2 * 32 * 128 * 1000
    swa = get_model("mistralai/Mistral-7B-v0.1")
    capped = attention_flops_per_token(swa, context_tokens=4096)
    assert attention_flops_per_token(swa, context_tokens=10_000) == capped


def test_mla_attention_flops() -> None:
    spec = get_model("deepseek-ai/DeepSeek-V3")
    per_token = 2 * 128 * (128 + 64) + 2 * 128 * 128
    assert attention_flops_per_token(spec, context_tokens=10) == 61 * per_token * 10


def test_prefill_is_2nl_plus_causal_attention() -> None:
    spec = get_model("meta-llama/Llama-3.1-8B")
    n = param_counts(spec).total - param_counts(spec).embedding
    p = 2048
    expected = 2 * n * p + 32 * 4 * 4096 * p * (p + 1) / 2
    assert prefill_flops(spec, prompt_tokens=p) == pytest.approx(expected, rel=1e-12)
    # the usual approximation 2NL + 2·layers·L²·d_attn agrees within 0.1 %
    assert prefill_flops(spec, prompt_tokens=p) == pytest.approx(2 * n * p + 2 * 32 * p * p * 4096, rel=1e-3)


def test_prefill_equals_sum_of_decode_steps() -> None:
    for hf_id in ("openai/gpt-oss-20b", "meta-llama/Llama-3.1-8B", "deepseek-ai/DeepSeek-V2-Lite"):
        spec = get_model(hf_id)
        cached, prompt = 100, 300
        stepwise = sum(decode_flops_per_token(spec, context_tokens=cached + i) for i in range(1, prompt + 1))
        prefill = prefill_flops(spec, prompt_tokens=prompt, cached_tokens=cached)
        assert prefill == pytest.approx(stepwise, rel=1e-12)


def test_prefill_with_cache_is_the_tail_of_a_longer_prefill() -> None:
    spec = get_model("google/gemma-2-9b")
    whole = prefill_flops(spec, prompt_tokens=6000)
    head = prefill_flops(spec, prompt_tokens=2500)
    tail = prefill_flops(spec, prompt_tokens=3500, cached_tokens=2500)
    assert head + tail == pytest.approx(whole, rel=1e-12)


def test_training_is_three_forward_passes() -> None:
    spec = get_model("meta-llama/Llama-2-7b-hf")
    n = param_counts(spec).total - param_counts(spec).embedding
    per_token = training_flops_per_token(spec, seq_len=4096)
    assert per_token == pytest.approx(3 * prefill_flops(spec, prompt_tokens=4096) / 4096)
    assert per_token > 6 * n


def test_negative_inputs_are_user_errors() -> None:
    spec = get_model("meta-llama/Llama-3.1-8B")
    with pytest.raises(UserInputError):
        prefill_flops(spec, prompt_tokens=-1)
    with pytest.raises(UserInputError):
        attention_flops_per_token(spec, context_tokens=-5)
    with pytest.raises(UserInputError):
        kv_elements_for_sequence(spec, tokens=-1)
    with pytest.raises(UserInputError):
        training_flops_per_token(spec, seq_len=0)
    assert prefill_flops(spec, prompt_tokens=0) == 0

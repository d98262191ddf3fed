"""glm4_moe (GLM-4.5, GLM-4.5-Air) and qwen3_next (Qwen3-Next-80B-A3B): parameter counts against the
published totals, KV cache and recurrent state per the architecture, counted by hand.

The configs are fixtures (``fixtures/*.json``, each with its source URL in ``_source``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.models.hf_config import SUPPORTED_MODEL_TYPES, parse_hf_config
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import FileFormatError
from gpuplan.core.model.arith import kv_elements_for_sequence, param_counts
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.memory import kv_bytes_per_sequence_at_len, kv_bytes_per_token_per_gpu

FIXTURES = Path(__file__).parent / "fixtures"
GLM = "zai-org/GLM-4.5"
AIR = "zai-org/GLM-4.5-Air"
NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
BF16_BYTES = 2


def _raw(hf_id: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((FIXTURES / f"{hf_id.replace('/', '__')}.json").read_text("utf-8"))
    return config


def _spec(hf_id: str, **overrides: Any) -> ModelSpec:
    return parse_hf_config(_raw(hf_id) | overrides, model_id=hf_id)


def test_both_types_are_supported_and_every_fixture_names_its_source() -> None:
    assert {"glm4_moe", "qwen3_next"} <= set(SUPPORTED_MODEL_TYPES)
    for hf_id in (GLM, AIR, NEXT):
        assert _spec(hf_id).source[0].startswith(f"https://huggingface.co/{hf_id}/")


@pytest.mark.parametrize("hf_id", [GLM, AIR, NEXT])
def test_total_parameters_within_one_percent_of_the_published_total(hf_id: str) -> None:
    spec = _spec(hf_id)
    assert spec.params_reported is not None
    total = param_counts(spec).total
    assert abs(total / spec.params_reported - 1) < 0.01, total


@pytest.mark.parametrize("hf_id", [GLM, AIR, NEXT])
def test_active_parameters_round_to_the_published_whole_billions(hf_id: str) -> None:
    """The model cards give active parameters in whole billions, without the embedding and LM head
    (GLM-4.5: "32B active"; Qwen3-Next: "3B activated"); gpuplan's ``active`` includes both."""
    spec = _spec(hf_id)
    counts = param_counts(spec)
    assert spec.active_params_reported is not None
    non_embedding_active = counts.active - counts.embedding - counts.lm_head
    assert round(non_embedding_active / 1e9) == spec.active_params_reported / 1e9


def test_glm45_layers_experts_and_extra_params_by_hand() -> None:
    spec = _spec(GLM)
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.num_moe_layers) == (160, 8, 89)
    assert (spec.num_dense_mlp_layers, spec.moe.shared_intermediate_size) == (3, 1536)
    hidden, q, kv = 5120, 96 * 128, 8 * 128
    per_layer = 2 * hidden + (q + 2 * kv) + 2 * 128  # two norms, q/k/v biases, q/k norms
    assert spec.extra_params == 92 * per_layer + hidden + 89 * 160  # final norm, router bias
    air = _spec(AIR)  # no q/k norms (use_qk_norm false); one dense layer
    assert air.extra_params == 46 * (2 * 4096 + 96 * 128 + 2 * 1024) + 4096 + 45 * 128
    assert air.num_dense_mlp_layers == 1


@pytest.mark.parametrize(("hf_id", "layers"), [(GLM, 92), (AIR, 46)])
def test_glm_kv_bytes_per_token_by_hand(hf_id: str, layers: int) -> None:
    spec = _spec(hf_id)
    per_token = layers * 2 * 8 * 128 * BF16_BYTES  # K and V, 8 KV heads of 128, every layer
    assert kv_bytes_per_token_per_gpu(spec, kv_dtype=get_dtype("bf16"), tp=1) == per_token
    assert kv_bytes_per_token_per_gpu(spec, kv_dtype=get_dtype("bf16"), tp=8) == per_token / 8
    assert spec.recurrent_state_bytes == 0


def test_qwen3_next_layer_split_and_moe() -> None:
    spec = _spec(NEXT)
    assert spec.num_layers == 48 and spec.num_attention_layers == 12  # layers 3, 7, …, 47
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.num_moe_layers) == (512, 10, 48)
    assert (spec.moe.num_shared_experts, spec.moe.shared_intermediate_size) == (1, 512)
    explicit = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)]
    assert _spec(NEXT, layer_types=explicit) == spec


def test_qwen3_next_extra_params_by_hand() -> None:
    hidden, k, v, value_heads = 2048, 16 * 128, 32 * 128, 32
    delta = (
        hidden * (2 * k + 2 * v)  # in_proj_qkvz
        + hidden * 2 * value_heads  # in_proj_ba
        + (2 * k + v) * 4  # depthwise conv1d, kernel 4, no bias
        + 2 * value_heads  # dt_bias, A_log
        + 128  # gated RMSNorm over a value head
        + v * hidden  # out_proj
    )
    gated_attention = hidden * 16 * 256 + 2 * 256  # output-gate half of q_proj, q/k norms
    norms = 48 * 2 * hidden + hidden
    shared_expert_gate = 48 * hidden
    assert _spec(NEXT).extra_params == norms + 36 * delta + 12 * gated_attention + shared_expert_gate


def test_qwen3_next_kv_only_in_full_attention_layers_and_a_fixed_state_in_the_rest() -> None:
    spec = _spec(NEXT)
    bf16 = get_dtype("bf16")
    per_token = 12 * 2 * 2 * 256 * BF16_BYTES  # 12 full layers × K,V × 2 KV heads × head_dim 256
    assert kv_bytes_per_token_per_gpu(spec, kv_dtype=bf16, tp=1) == per_token == 24_576
    recurrent = 32 * 128 * 128  # value heads × key head dim × value head dim
    conv = (2 * 16 * 128 + 32 * 128) * (4 - 1)  # conv channels × (kernel − 1)
    state = 36 * (recurrent + conv) * BF16_BYTES
    assert spec.recurrent_state_bytes == state == 39_518_208  # 37.7 MiB per sequence
    held = [
        kv_bytes_per_sequence_at_len(
            spec, tokens=n, kv_dtype=bf16, tp=1, pp=1, chunk_tokens=8192, windows=True
        )
        for n in (1, 32_768)
    ]
    assert held == [per_token + state, 32_768 * per_token + state]  # the state does not grow
    assert kv_elements_for_sequence(spec, tokens=10) == 10 * per_token // BF16_BYTES


def test_a_qwen3_next_layer_types_list_of_the_wrong_length_names_the_key() -> None:
    with pytest.raises(FileFormatError, match="layer_types"):
        _spec(NEXT, layer_types=["full_attention"] * 3)
    with pytest.raises(FileFormatError, match="layer_types"):
        _spec(NEXT, layer_types=["mamba"] * 48)

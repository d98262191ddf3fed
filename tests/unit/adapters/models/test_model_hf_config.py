"""parse_hf_config: family specifics and malformed input."""

from __future__ import annotations

from typing import Any

import pytest
from models_testdata import all_raw_configs, raw_config

from gpuplan.adapters.models.hf_config import SUPPORTED_MODEL_TYPES, parse_hf_config
from gpuplan.core.errors import FileFormatError
from gpuplan.core.model.arith import param_counts
from gpuplan.core.model.spec import ModelSpec


def _llama() -> dict[str, Any]:
    return raw_config("meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize("hf_id", sorted(all_raw_configs()))
def test_every_bundled_config_parses(hf_id: str) -> None:
    spec = parse_hf_config(raw_config(hf_id), model_id=hf_id)
    assert isinstance(spec, ModelSpec)
    assert spec.id == hf_id
    assert param_counts(spec).total > 0


def test_every_bundled_model_type_is_supported() -> None:
    types = {str(c["model_type"]).split()[0] for c in all_raw_configs().values()}
    assert types <= set(SUPPORTED_MODEL_TYPES)


def test_head_dim_is_respected() -> None:
    spec = parse_hf_config(raw_config("Qwen/Qwen3-8B"), model_id="q")
    assert (spec.head_dim, spec.num_attention_heads, spec.num_kv_heads) == (128, 32, 8)
    gemma = parse_hf_config(raw_config("google/gemma-7b"), model_id="g")
    assert gemma.head_dim == 256 and gemma.hidden_size == 3072


def test_attention_kinds() -> None:
    ids = (
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-3.1-8B",
        "tiiuae/falcon-7b",
        "deepseek-ai/DeepSeek-V3",
    )
    kinds = [parse_hf_config(raw_config(hf_id), model_id=hf_id).attention for hf_id in ids]
    assert kinds == ["mha", "gqa", "mqa", "mla"]


def test_mla_fields() -> None:
    spec = parse_hf_config(raw_config("deepseek-ai/DeepSeek-V3"), model_id="ds")
    assert spec.mla is not None and spec.moe is not None
    assert (spec.mla.q_lora_rank, spec.mla.kv_lora_rank, spec.mla.qk_rope_head_dim) == (1536, 512, 64)
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.num_moe_layers) == (256, 8, 58)
    assert spec.num_dense_mlp_layers == 3
    lite = parse_hf_config(raw_config("deepseek-ai/DeepSeek-V2-Lite"), model_id="lite")
    assert lite.mla is not None and lite.mla.q_lora_rank is None
    assert lite.moe is not None and lite.moe.shared_intermediate_size == 2 * 1408


def test_nemotron_h_hybrid_layers() -> None:
    spec = parse_hf_config(raw_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), model_id="nano")
    assert spec.num_layers == 52
    assert spec.num_attention_layers == 6
    assert spec.num_dense_mlp_layers == 0
    assert spec.moe is not None and spec.moe.num_moe_layers == 23 and spec.moe.latent_size is None
    assert spec.mlp_kind == "plain"
    assert spec.extra_params > 23 * 38_000_000  # 23 Mamba-2 mixers of ~38.7M each


def test_nemotron_h_block_type_list_and_latent_moe() -> None:
    ultra = parse_hf_config(raw_config("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"), model_id="ultra")
    assert ultra.num_layers == 108  # from layers_block_type: the config has no num_hidden_layers
    assert ultra.moe is not None and ultra.moe.latent_size == 2048


def test_llama4_uses_text_config() -> None:
    spec = parse_hf_config(raw_config("meta-llama/Llama-4-Maverick-17B-128E-Instruct"), model_id="l4")
    assert spec.model_type == "llama4"
    assert spec.moe is not None
    assert (spec.moe.num_moe_layers, spec.num_dense_mlp_layers, spec.intermediate_size) == (24, 24, 16384)
    assert spec.moe.num_shared_experts == 1


def test_megatron_config_without_heads() -> None:
    spec = parse_hf_config(raw_config("megatron/gpt-1t-2021"), model_id="m")
    assert spec.model_type == "gpt"
    assert spec.num_attention_heads is None and spec.head_dim is None
    assert spec.tie_word_embeddings and spec.learned_position_embeddings == 2048


def test_nemotron_squared_relu_is_plain() -> None:
    assert parse_hf_config(raw_config("nemo/nemotron-8b"), model_id="n").mlp_kind == "plain"
    assert parse_hf_config(raw_config("meta-llama/Llama-3.1-8B"), model_id="l").mlp_kind == "gated"


def test_mpt_positions_only_without_alibi() -> None:
    foundry = parse_hf_config(raw_config("mosaicml/mpt-7b-llmfoundry"), model_id="f")
    released = parse_hf_config(raw_config("mosaicml/mpt-7b"), model_id="r")
    assert foundry.learned_position_embeddings == 2048
    assert released.learned_position_embeddings == 0


def test_opt_position_offset() -> None:
    assert parse_hf_config(raw_config("facebook/opt-13b"), model_id="o").learned_position_embeddings == 2050


def test_reported_params_and_dtype() -> None:
    spec = parse_hf_config(raw_config("mistralai/Mixtral-8x7B-v0.1"), model_id="m")
    assert spec.params_reported == pytest.approx(46.7e9)
    assert spec.active_params_reported == pytest.approx(12.9e9)
    assert spec.torch_dtype == "bf16"
    assert parse_hf_config(raw_config("facebook/opt-13b"), model_id="o").torch_dtype == "fp16"
    assert spec.source


# -- malformed input ------------------------------------------------------------------------------


def _error(config: Any, model_id: str = "org/model") -> str:
    with pytest.raises(FileFormatError) as info:
        parse_hf_config(config, model_id=model_id)
    return str(info.value)


def test_missing_key_names_key_and_model() -> None:
    cfg = _llama()
    del cfg["hidden_size"]
    message = _error(cfg, "org/x")
    assert message.startswith("config.json for org/x: missing 'hidden_size'")
    assert "expected an int" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_hidden_layers", "32"),  # string for int
        ("num_hidden_layers", -4),  # negative
        ("num_hidden_layers", 0),
        ("hidden_size", 4096.5),
        ("hidden_size", True),
        ("vocab_size", None),
        ("intermediate_size", [14336]),
        ("num_key_value_heads", 5),  # does not divide 32 heads
        ("num_attention_heads", 3),  # does not divide hidden (no head_dim)
        ("tie_word_embeddings", "yes"),
        ("num_hidden_layers", 10**9),  # implausible
    ],
)
def test_bad_values_name_the_key(key: str, value: Any) -> None:
    cfg = _llama()
    cfg[key] = value
    assert repr(key) in _error(cfg)


def test_unsupported_and_missing_model_type() -> None:
    cfg = _llama()
    cfg["model_type"] = "xlnet"
    assert "'model_type'" in _error(cfg) and "not supported" in _error(cfg)
    del cfg["model_type"]
    assert "missing 'model_type'" in _error(cfg)
    cfg["model_type"] = "("
    assert "'model_type'" in _error(cfg)


def test_not_a_mapping() -> None:
    assert "expected a JSON object" in _error([1, 2, 3])


def test_nested_keys_are_named_with_their_path() -> None:
    cfg = raw_config("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    del cfg["text_config"]["num_local_experts"]
    assert "'text_config.num_local_experts'" in _error(cfg)
    cfg["text_config"] = "oops"
    assert "'text_config'" in _error(cfg)


def test_family_specific_errors() -> None:
    gemma = raw_config("google/gemma-3-12b-it")
    gemma["layer_types"] = gemma["layer_types"][:-1]
    assert "'layer_types'" in _error(gemma)
    qwen = raw_config("Qwen/Qwen-7B-Chat")
    qwen["intermediate_size"] = 22017
    assert "'intermediate_size'" in _error(qwen)
    hybrid = raw_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    hybrid["hybrid_override_pattern"] = "MEX*"
    assert "'hybrid_override_pattern'" in _error(hybrid)
    moe = raw_config("mistralai/Mixtral-8x7B-v0.1")
    moe["num_experts_per_tok"] = 9
    assert "'num_experts_per_tok'" in _error(moe)
    swa = raw_config("openai/gpt-oss-20b")
    del swa["sliding_window"]
    assert "missing 'sliding_window'" in _error(swa)

"""The model description the rest of gpuplan computes on, and the derived counts it needs.

:class:`ModelSpec` is parsed once from a HF ``config.json`` (see ``hf_config.py``); nothing else in
gpuplan reads raw config dicts. The arithmetic over it lives in ``arith.py`` (pure functions).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.frozen import FrozenModel

AttentionKind = Literal["mha", "gqa", "mqa", "mla", "none"]
MlpKind = Literal["gated", "plain"]
LayerKind = Literal["attention", "mamba", "mlp_only"]


class MoeSpec(FrozenModel):
    """Mixture-of-experts FFN: ``num_experts`` routed experts, ``top_k`` active per token."""

    num_experts: int = Field(ge=1)
    top_k: int = Field(ge=1)
    expert_intermediate_size: int = Field(ge=1)
    num_shared_experts: int = Field(default=0, ge=0)
    shared_intermediate_size: int = Field(default=0, ge=0, description="total width of the shared experts")
    num_moe_layers: int = Field(ge=1, description="layers whose FFN is MoE (the rest are dense)")
    latent_size: int | None = Field(
        default=None,
        ge=1,
        description="routed experts work in this width (Nemotron-3 LatentMoE: hidden→latent→hidden)",
    )
    expert_extra_params: int = Field(
        default=0, ge=0, description="one routed expert's params outside its matrices (biases)"
    )


class MlaSpec(FrozenModel):
    """DeepSeek multi-head latent attention dims (KV cache holds ``kv_lora_rank + qk_rope_head_dim``)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


class KvGroup(FrozenModel):
    """Layers that share one KV-cache shape. ``window_tokens`` is set for sliding-window layers."""

    num_layers: int = Field(ge=1)
    elements_per_token_per_layer: int = Field(ge=1, description="K+V elements (or MLA latent) per token")
    window_tokens: int | None = Field(default=None, ge=1)


class ModelSpec(FrozenModel):
    """A transformer (or hybrid) LM's architecture, enough for params, FLOPs and KV-cache bytes."""

    id: str
    model_type: str
    num_layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    num_attention_heads: int | None = Field(default=None, ge=1)
    num_kv_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    intermediate_size: int = Field(ge=1)
    num_attention_layers: int | None = Field(
        default=None, ge=0, description="layers with an attention mixer; None = num_layers (hybrids: fewer)"
    )
    num_dense_mlp_layers: int | None = Field(
        default=None, ge=0, description="layers with a dense FFN; None = num_layers − moe.num_moe_layers"
    )
    embedding_dim: int | None = Field(
        default=None, ge=1, description="token-embedding width when it differs from hidden_size (OPT)"
    )
    mlp_kind: MlpKind
    attention: AttentionKind
    tie_word_embeddings: bool
    max_position_embeddings: int | None = None
    learned_position_embeddings: int = Field(default=0, ge=0, description="rows of a learned position table")
    torch_dtype: str = "bf16"
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    kv_groups: tuple[KvGroup, ...] = Field(description="KV-cache layout; empty for encoders")
    extra_params: int = Field(default=0, description="parameters outside the formula (norms, biases, mamba)")
    recurrent_state_bytes: float = Field(
        default=0.0, ge=0, description="fixed per-sequence state of recurrent (Mamba) layers, whole model"
    )
    params_reported: float | None = Field(default=None, description="_params_b_reported x 1e9")
    active_params_reported: float | None = None
    source: tuple[str, ...] = ()


class ParamCounts(FrozenModel):
    """Parameter counts in elements (not bytes)."""

    total: int
    active: int = Field(description="parameters used per token (MoE: shared + top_k experts)")
    embedding: int = Field(description="input embedding (+ learned positions)")
    lm_head: int = Field(description="output projection; 0 when tied to the embedding")
    expert_params_per_expert_per_layer: int = Field(
        description="one routed expert in one MoE layer; 0 if dense"
    )
    dense_non_embedding: int = Field(description="all params every token touches, minus embeddings/lm_head")

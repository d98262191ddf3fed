"""The model description the rest of gpuplan computes on, and the derived counts it needs.

:class:`ModelSpec` is parsed once from a HF ``config.json`` (see ``hf_config.py``); nothing else in
gpuplan reads raw config dicts. The arithmetic over it lives in ``arith.py`` (pure functions).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.frozen import FrozenModel

# Physical ceilings on a model's sizes: each is the largest value in a published config times a
# generous margin, so no real model is refused while a corrupt or hostile config (10^8 heads) is a
# one-line error naming the field, before any work scales with it. "Bundled" = data/models/configs.
MAX_LAYERS = 16_384
"""16x DeepNet's 1,000 layers (Wang et al. 2022, the deepest published transformer; bundled max:
megatron/gpt-1t-2021, 128)."""
MAX_ATTENTION_HEADS = 4_096
"""About 18x tiiuae/falcon-180B's 232 query heads (bundled max); also bounds KV heads."""
MAX_HEAD_DIM = 4_096
"""16x the widest bundled head (google/gemma-7b, 256)."""
MAX_HIDDEN_SIZE = 262_144
"""About 10x megatron/gpt-1t-2021's 25,600 (bundled max); also bounds embedding, latent and MLA
widths, which are at most a hidden size in every published model."""
MAX_INTERMEDIATE_SIZE = 1_048_576
"""About 10x megatron/gpt-1t-2021's 102,400 (bundled max); also bounds an expert's width."""
MAX_VOCAB_SIZE = 16_777_216
"""64x google/gemma-3-12b-it's 262,208 (bundled max); 18x XLM-V's 901,629, the largest
published vocabulary."""
MAX_POSITIONS = 1_073_741_824
"""About 100x meta-llama/Llama-4-Scout's 10,485,760-token context (2^30); bounds positions and
sliding windows."""
MAX_EXPERTS = 65_536
"""32x google/switch-c-2048's 2,048 routed experts (bundled max: Nemotron-3-Ultra, 512)."""
MAX_TOP_K = 1_024
"""About 46x nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B's 22 active experts per token (bundled max)."""

AttentionKind = Literal["mha", "gqa", "mqa", "mla", "none"]
MlpKind = Literal["gated", "plain"]
LayerKind = Literal["attention", "mamba", "mlp_only"]


class MoeSpec(FrozenModel):
    """Mixture-of-experts FFN: ``num_experts`` routed experts, ``top_k`` active per token."""

    num_experts: int = Field(ge=1, le=MAX_EXPERTS)
    top_k: int = Field(ge=1, le=MAX_TOP_K)
    expert_intermediate_size: int = Field(ge=1, le=MAX_INTERMEDIATE_SIZE)
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    shared_intermediate_size: int = Field(
        default=0, ge=0, le=MAX_INTERMEDIATE_SIZE, description="total width of the shared experts"
    )
    num_moe_layers: int = Field(
        ge=1, le=MAX_LAYERS, description="layers whose FFN is MoE (the rest are dense)"
    )
    latent_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_HIDDEN_SIZE,
        description="routed experts work in this width (Nemotron-3 LatentMoE: hidden→latent→hidden)",
    )
    expert_extra_params: int = Field(
        default=0, ge=0, description="one routed expert's params outside its matrices (biases)"
    )


class MlaSpec(FrozenModel):
    """DeepSeek multi-head latent attention dims (KV cache holds ``kv_lora_rank + qk_rope_head_dim``)."""

    q_lora_rank: int | None = Field(ge=1, le=MAX_HIDDEN_SIZE)
    kv_lora_rank: int = Field(ge=1, le=MAX_HIDDEN_SIZE)
    qk_nope_head_dim: int = Field(ge=1, le=MAX_HEAD_DIM)
    qk_rope_head_dim: int = Field(ge=1, le=MAX_HEAD_DIM)
    v_head_dim: int = Field(ge=1, le=MAX_HEAD_DIM)


class KvGroup(FrozenModel):
    """Layers that share one KV-cache shape. ``window_tokens`` is set for sliding-window layers."""

    num_layers: int = Field(ge=1, le=MAX_LAYERS)
    elements_per_token_per_layer: int = Field(ge=1, description="K+V elements (or MLA latent) per token")
    window_tokens: int | None = Field(default=None, ge=1, le=MAX_POSITIONS)


class ModelSpec(FrozenModel):
    """A transformer (or hybrid) LM's architecture, enough for params, FLOPs and KV-cache bytes."""

    id: str
    model_type: str
    num_layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden_size: int = Field(ge=1, le=MAX_HIDDEN_SIZE)
    vocab_size: int = Field(ge=1, le=MAX_VOCAB_SIZE)
    num_attention_heads: int | None = Field(default=None, ge=1, le=MAX_ATTENTION_HEADS)
    num_kv_heads: int | None = Field(default=None, ge=1, le=MAX_ATTENTION_HEADS)
    head_dim: int | None = Field(default=None, ge=1, le=MAX_HEAD_DIM)
    intermediate_size: int = Field(ge=1, le=MAX_INTERMEDIATE_SIZE)
    num_attention_layers: int | None = Field(
        default=None,
        ge=0,
        le=MAX_LAYERS,
        description="layers with an attention mixer; None = num_layers (hybrids: fewer)",
    )
    num_dense_mlp_layers: int | None = Field(
        default=None,
        ge=0,
        le=MAX_LAYERS,
        description="layers with a dense FFN; None = num_layers − moe.num_moe_layers",
    )
    embedding_dim: int | None = Field(
        default=None,
        ge=1,
        le=MAX_HIDDEN_SIZE,
        description="token-embedding width when it differs from hidden_size (OPT)",
    )
    mlp_kind: MlpKind
    attention: AttentionKind
    tie_word_embeddings: bool
    max_position_embeddings: int | None = Field(default=None, ge=1, le=MAX_POSITIONS)
    learned_position_embeddings: int = Field(
        default=0, ge=0, le=MAX_POSITIONS, description="rows of a learned position table"
    )
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

"""Parameter counts the training model needs: model-parallel shards, LoRA adapter sizes.

LoRA (Hu et al. 2021) adds ``r·(d_in + d_out)`` parameters to each adapted matrix; ``all`` targets
q, k, v, o and the MLP projections (QLoRA's recipe, Dettmers et al. 2023), ``attention`` only q, k,
v, o. Routed experts are not adapted. PEFT adapts each ``nn.Linear``: where q, k and v are one fused
projection (:data:`FUSED_QKV_MODEL_TYPES`) they share one adapter of ``r·(h + q + 2kv)``.
"""

from __future__ import annotations

from functools import lru_cache

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.spec import LoraTargets

FUSED_QKV_MODEL_TYPES = frozenset({"qwen", "mpt", "phi3", "falcon", "bloom", "chatglm", "gpt_neox"})
"""HF architectures with one q/k/v ``nn.Linear``: Qwen-1 ``c_attn``
(https://huggingface.co/Qwen/Qwen-7B/blob/main/modeling_qwen.py), MPT ``Wqkv``, Phi-3 ``qkv_proj``,
Falcon, BLOOM, GPT-NeoX and ChatGLM ``query_key_value`` (their ``modeling_*.py`` in transformers)."""


class ParamSplit(FrozenModel):
    """Elements by kind: ``routed`` are expert weights (sharded by EP), ``dense`` everything else."""

    total: int
    routed: int
    dense: int
    embeddings: int
    per_layer_dense: float


@lru_cache(maxsize=256)
def param_split(model: ModelSpec) -> ParamSplit:
    counts = arith.param_counts(model)
    routed = 0
    if model.moe is not None:
        routed = model.moe.num_moe_layers * model.moe.num_experts * counts.expert_params_per_expert_per_layer
    dense = counts.total - routed
    embeddings = counts.embedding + counts.lm_head
    return ParamSplit(
        total=counts.total,
        routed=routed,
        dense=dense,
        embeddings=embeddings,
        per_layer_dense=(dense - embeddings) / model.num_layers,
    )


def widths(model: ModelSpec) -> tuple[int, int]:
    """(query width, key/value width) of one attention layer."""
    h = model.hidden_size
    q = model.num_attention_heads * model.head_dim if model.num_attention_heads and model.head_dim else h
    kv = model.num_kv_heads * model.head_dim if model.num_kv_heads and model.head_dim else q
    return q, kv


def lora_params(model: ModelSpec, *, rank: int, targets: LoraTargets) -> int:
    """Adapter parameters over all layers for rank ``rank``."""
    h = model.hidden_size
    q, kv = widths(model)
    qkv = h + q + 2 * kv if model.model_type in FUSED_QKV_MODEL_TYPES else (h + q) + 2 * (h + kv)
    attention = qkv + (q + h)
    mats = 3 if model.mlp_kind == "gated" else 2
    width = model.intermediate_size
    if model.moe is not None and model.moe.shared_intermediate_size:
        width = model.moe.shared_intermediate_size
    mlp = mats * (h + width) if targets == "all" else 0
    return rank * (attention + mlp) * model.num_layers


def shard_params(model: ModelSpec, *, tp: int, pp: int, ep: int) -> tuple[float, float]:
    """(dense, routed) parameters held by one GPU before ZeRO sharding."""
    split = param_split(model)
    return split.dense / (tp * pp), split.routed / (ep * pp)

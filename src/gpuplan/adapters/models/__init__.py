"""Model architectures: parse HF ``config.json`` into a :class:`ModelSpec`, look models up by id,
and count parameters, FLOPs and KV-cache elements (re-exported from ``gpuplan.core.model.arith``)."""

from gpuplan.adapters.models.hf_config import SUPPORTED_MODEL_TYPES, parse_hf_config
from gpuplan.adapters.models.registry import (
    ModelSummary,
    aliases,
    bundled_ids,
    get_model,
    list_models,
    model_for_seq_len,
    with_position_table,
)
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
from gpuplan.core.model.spec import KvGroup, MlaSpec, ModelSpec, MoeSpec, ParamCounts

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "KvGroup",
    "MlaSpec",
    "ModelSpec",
    "ModelSummary",
    "MoeSpec",
    "ParamCounts",
    "aliases",
    "attention_flops_per_token",
    "bundled_ids",
    "decode_flops_per_token",
    "get_model",
    "kv_elements_for_sequence",
    "kv_elements_per_token",
    "list_models",
    "matmul_flops_per_token",
    "model_for_seq_len",
    "param_counts",
    "parse_hf_config",
    "prefill_flops",
    "training_flops_per_token",
    "with_position_table",
]

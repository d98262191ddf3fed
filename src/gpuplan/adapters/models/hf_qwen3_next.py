"""Qwen3-Next (``qwen3_next``): Gated DeltaNet linear attention with gated full attention every
``full_attention_interval``-th layer (3 of 4 layers linear), a Qwen-MoE FFN on every layer.

Module by module (HF ``transformers/models/qwen3_next/modeling_qwen3_next.py``,
https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3_next/modeling_qwen3_next.py):

* layer types: ``layer_types`` when given, else layer ``i`` is full attention when
  ``(i + 1) % full_attention_interval == 0`` (``Qwen3NextConfig``'s default).
* full (gated) attention: ``q_proj`` is ``hidden × 2·heads·head_dim`` (query and its output gate),
  ``k_proj``/``v_proj`` ``hidden × kv_heads·head_dim``, ``o_proj``, ``q_norm``/``k_norm`` of
  ``head_dim``. The gate half of ``q_proj`` is counted into ``extra_params``.
* Gated DeltaNet (``Qwen3NextGatedDeltaNet``), with ``k = linear_num_key_heads × linear_key_head_dim``,
  ``v = linear_num_value_heads × linear_value_head_dim`` and ``conv = 2k + v``: ``in_proj_qkvz``
  ``hidden × (2k + 2v)``, ``in_proj_ba`` ``hidden × 2·value_heads``, depthwise ``conv1d``
  ``conv × linear_conv_kernel_dim`` (no bias), ``dt_bias`` and ``A_log`` one per value head, the gated
  RMSNorm ``linear_value_head_dim``, ``out_proj`` ``v × hidden``; all in ``extra_params``.
* FFN: :func:`gpuplan.adapters.models.hf_llama.qwen_moe` (``num_experts`` of ``moe_intermediate_size``,
  one shared expert of ``shared_expert_intermediate_size`` with a ``hidden × 1`` gate).

Memory per sequence: only the full-attention layers hold a KV cache (``2 × kv_heads × head_dim`` per
token); each linear layer holds a fixed state, whatever the length (vLLM
``MambaStateShapeCalculator.gated_delta_net_state_shape``,
https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/mamba/mamba_utils.py):
a recurrent state of ``value_heads × key_head_dim × value_head_dim`` and a convolution state of
``conv × (linear_conv_kernel_dim − 1)`` elements, both in the 16-bit model dtype (vLLM's
``mamba_ssm_cache_dtype`` default "auto"). Qwen3-Next-80B-A3B: 36 × (524,288 + 24,576) × 2 B =
37.7 MiB per sequence (``recurrent_state_bytes``). Approximation: the DeltaNet's recurrent update
(about ``4 × value_heads × key_head_dim × value_head_dim`` FLOPs per token per layer, ~2 % of the
layer's projection FLOPs) is not added to the FLOP count; its projections are (2 per parameter).
"""

from __future__ import annotations

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Core, Fields, read_core
from gpuplan.adapters.models.hf_llama import qwen_moe
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.model.spec import KvGroup

_LAYER_TYPES = ("linear_attention", "full_attention")


def _full_attention_layers(r: ConfigReader, num_layers: int) -> int:
    types = r.str_list("layer_types")
    if types is None:
        interval = r.integer("full_attention_interval", 4)
        return sum(1 for i in range(num_layers) if (i + 1) % interval == 0)
    if len(types) != num_layers:
        raise r.error("layer_types", f"has {len(types)} entries for {num_layers} layers")
    unknown = sorted({t for t in types if t not in _LAYER_TYPES})
    if unknown:
        raise r.error("layer_types", f"has unknown entries {unknown} (expected {list(_LAYER_TYPES)})")
    return types.count("full_attention")


def _delta_dims(r: ConfigReader) -> tuple[int, int, int, int]:
    """(value heads, key width k, value width v, conv channels 2k + v)."""
    value_heads = r.integer("linear_num_value_heads")
    key_width = r.integer("linear_num_key_heads") * r.integer("linear_key_head_dim")
    value_width = value_heads * r.integer("linear_value_head_dim")
    return value_heads, key_width, value_width, 2 * key_width + value_width


def _delta_params(r: ConfigReader, hidden: int) -> int:
    """One Gated DeltaNet mixer (see module docstring)."""
    value_heads, key_width, value_width, conv = _delta_dims(r)
    in_proj = hidden * (2 * key_width + 2 * value_width) + hidden * 2 * value_heads
    conv1d = conv * r.integer("linear_conv_kernel_dim", 4)
    return in_proj + conv1d + 2 * value_heads + r.integer("linear_value_head_dim") + value_width * hidden


def _delta_state_bytes(r: ConfigReader) -> float:
    """One sequence's state in one Gated DeltaNet layer (recurrent + convolution), 16-bit."""
    value_heads, _, _, conv = _delta_dims(r)
    recurrent = value_heads * r.integer("linear_key_head_dim") * r.integer("linear_value_head_dim")
    conv_state = conv * (r.integer("linear_conv_kernel_dim", 4) - 1)
    return float((recurrent + conv_state) * get_dtype("bf16").bytes_per_element)


def _attention_extra(r: ConfigReader, core: Core) -> int:
    """One full-attention layer beyond q/k/v/o: the output-gate half of q_proj, q/k norms, biases."""
    extra = core.hidden * core.q_width + 2 * (core.head_dim or 0)
    if r.flag("attention_bias", False):
        extra += 2 * core.q_width + 2 * core.kv_width
    return extra


def parse_qwen3_next(r: ConfigReader, _t: str) -> Fields:
    """Fields of a ``qwen3_next`` config (see module docstring)."""
    core = read_core(r)
    full = _full_attention_layers(r, core.num_layers)
    linear = core.num_layers - full
    moe, dense_layers, moe_extra = qwen_moe(r, core)
    width = r.integer("intermediate_size") if dense_layers else r.integer("intermediate_size", 1)
    extra = core.num_layers * 2 * core.hidden + core.hidden + moe_extra  # 2 norms per layer + final
    extra += full * _attention_extra(r, core) + linear * _delta_params(r, core.hidden)
    groups = (KvGroup(num_layers=full, elements_per_token_per_layer=core.kv_elements),) if full else ()
    fields = core.fields()
    if not full:
        fields["attention"] = "none"
    return fields | {
        "intermediate_size": width,
        "mlp_kind": "gated",
        "moe": moe,
        "num_attention_layers": full,
        "num_dense_mlp_layers": dense_layers,
        "extra_params": extra,
        "kv_groups": groups,
        "recurrent_state_bytes": linear * _delta_state_bytes(r),
    }

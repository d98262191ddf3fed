"""GLM-4.5 / GLM-4.5-Air / GLM-4.6 (``glm4_moe``): GQA attention with a DeepSeek-V3-style MoE stack.

Module by module (HF ``transformers/models/glm4_moe/modeling_glm4_moe.py``,
https://github.com/huggingface/transformers/blob/main/src/transformers/models/glm4_moe/modeling_glm4_moe.py):

* attention: ``q_proj``/``k_proj``/``v_proj`` with a bias when ``attention_bias`` (GLM-4.5: true),
  ``o_proj`` without one; ``q_norm``/``k_norm`` RMSNorms of ``head_dim`` when ``use_qk_norm``
  (GLM-4.5: true, GLM-4.5-Air: false). ``partial_rotary_factor`` changes no weight.
* FFN: the first ``first_k_dense_replace`` layers are a dense gated MLP of ``intermediate_size``; the
  rest are MoE (:func:`gpuplan.adapters.models.hf_deepseek.deepseek_moe`): ``n_routed_experts`` gated
  experts of ``moe_intermediate_size``, ``n_shared_experts`` shared ones of the same width, a router
  ``hidden × experts`` and its ``e_score_correction_bias`` (one per expert, in the checkpoint).
* KV cache: every layer holds ``2 × num_key_value_heads × head_dim`` elements per token.

The multi-token-prediction layer (``num_nextn_predict_layers``) is not counted, as for DeepSeek-V3: a
server runs it only for speculative decoding.
"""

from __future__ import annotations

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Fields, read_core
from gpuplan.adapters.models.hf_deepseek import deepseek_moe
from gpuplan.core.model.spec import KvGroup


def parse_glm4_moe(r: ConfigReader, _t: str) -> Fields:
    """Fields of a ``glm4_moe`` config (see module docstring)."""
    core = read_core(r)
    moe, dense_layers, _ = deepseek_moe(r, core)
    per_layer = 2 * core.hidden  # input_layernorm, post_attention_layernorm
    if r.flag("attention_bias", False):
        per_layer += core.qkv_bias
    if r.flag("use_qk_norm", False):
        per_layer += 2 * (core.head_dim or 0)
    router_bias = moe.num_experts * moe.num_moe_layers if moe is not None else 0
    return core.fields() | {
        "intermediate_size": r.integer("intermediate_size"),
        "mlp_kind": "gated",
        "moe": moe,
        "num_dense_mlp_layers": dense_layers,
        "extra_params": core.num_layers * per_layer + core.hidden + router_bias,
        "kv_groups": (KvGroup(num_layers=core.num_layers, elements_per_token_per_layer=core.kv_elements),),
    }

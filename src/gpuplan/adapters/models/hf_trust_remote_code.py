"""Families published with ``trust_remote_code`` key names: Qwen v1 (``qwen``) and ChatGLM.

Qwen v1 (``QWenLMHeadModel``): ``intermediate_size`` is twice the width of each MLP branch — w1 and
w2 are ``hidden → intermediate_size/2`` and c_proj maps ``intermediate_size/2 → hidden`` (Qwen-7B:
22016 → 11008 per branch). ``kv_channels`` is the head dim; attention is MHA; ``c_attn`` carries a
bias; embeddings are untied.

ChatGLM (GLM-4): ``num_layers``, ``ffn_hidden_size`` (SwiGLU width; ``dense_h_to_4h`` outputs
``2 × ffn_hidden_size``), ``multi_query_group_num`` KV heads when ``multi_query_attention``,
``kv_channels`` head dim, ``padded_vocab_size``, ``seq_length`` context.
"""

from __future__ import annotations

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Fields, kv_groups, read_core


def parse_qwen_v1(r: ConfigReader, _model_type: str) -> Fields:
    """Qwen-1 (Qwen-1_8B/7B/14B/72B)."""
    core = read_core(
        r,
        head_dim=("kv_channels", "head_dim"),
        kv_heads=(),
        max_pos=("max_position_embeddings", "seq_length"),
    )
    full = r.integer("intermediate_size", minimum=2)
    if full % 2:
        raise r.error("intermediate_size", f"= {full} is odd (Qwen v1 splits it into two equal branches)")
    width = full // 2
    per_layer = 2 * core.hidden + 3 * core.q_width  # ln_1, ln_2, c_attn bias
    if not r.flag("no_bias", True):
        per_layer += core.hidden + 2 * width + core.hidden
    return core.fields() | {
        "intermediate_size": width,
        "mlp_kind": "gated",
        "extra_params": core.num_layers * per_layer + core.hidden,
        "kv_groups": kv_groups(r, (False,) * core.num_layers, elements=core.kv_elements),
    }


def parse_chatglm(r: ConfigReader, _model_type: str) -> Fields:
    """ChatGLM2/3 and GLM-4 (``ChatGLMForConditionalGeneration``)."""
    mqa = r.flag("multi_query_attention", False)
    core = read_core(
        r,
        layers=("num_layers", "num_hidden_layers"),
        vocab=("padded_vocab_size", "vocab_size"),
        kv_heads=("multi_query_group_num",) if mqa else (),
        head_dim=("kv_channels", "head_dim"),
        max_pos=("seq_length", "max_position_embeddings"),
    )
    width = r.integer("ffn_hidden_size")
    linear_bias = r.flag("add_bias_linear", False)
    per_layer = (2 if r.flag("rmsnorm", True) else 4) * core.hidden
    if r.flag("add_qkv_bias", False) or linear_bias:
        per_layer += core.qkv_bias
    if linear_bias:
        per_layer += core.hidden + 2 * width + core.hidden
    final = core.hidden * (1 if r.flag("rmsnorm", True) else 2) if r.flag("post_layer_norm", True) else 0
    return core.fields() | {
        "intermediate_size": width,
        "mlp_kind": "gated",
        "extra_params": core.num_layers * per_layer + final,
        "kv_groups": kv_groups(r, (False,) * core.num_layers, elements=core.kv_elements),
    }

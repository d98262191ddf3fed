"""DeepSeek family: deepseek (v1 MoE, MHA), deepseek_v2 / deepseek_v3 / kimi_k2 (MLA + MoE).

Multi-head latent attention (DeepSeek-V2 paper, arXiv:2405.04434 §2.1): queries go through an
optional low-rank ``q_lora_rank`` bottleneck; keys and values are compressed into a
``kv_lora_rank`` latent plus one shared ``qk_rope_head_dim`` RoPE key, and that is all the KV cache
holds: ``kv_lora_rank + qk_rope_head_dim`` elements per token per layer (DeepSeek-V3: 512 + 64).

MoE layers: layer ``i`` is MoE when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``
(HF ``DeepseekV3DecoderLayer``); the first ``first_k_dense_replace`` layers use a dense MLP of
``intermediate_size``. ``n_shared_experts`` always-on experts are each ``moe_intermediate_size``
wide. The multi-token-prediction module (``num_nextn_predict_layers``) is not part of the model a
server runs by default and is not counted (DeepSeek-V3: 671B without it, 685B with it).
"""

from __future__ import annotations

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Core, Fields, read_core
from gpuplan.core.model.spec import MAX_EXPERTS, MAX_TOP_K, KvGroup, MlaSpec, MoeSpec

MLA_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})


def _mla(r: ConfigReader) -> MlaSpec:
    return MlaSpec(
        q_lora_rank=r.opt_int("q_lora_rank"),
        kv_lora_rank=r.integer("kv_lora_rank"),
        qk_nope_head_dim=r.integer("qk_nope_head_dim"),
        qk_rope_head_dim=r.integer("qk_rope_head_dim"),
        v_head_dim=r.integer("v_head_dim"),
    )


def deepseek_moe(r: ConfigReader, core: Core) -> tuple[MoeSpec | None, int, int]:
    """(moe, dense FFN layers, router-bias params). V3-style routing (``noaux_tc``) adds an
    ``e_score_correction_bias`` per expert per MoE layer."""
    experts = r.opt_int("n_routed_experts", maximum=MAX_EXPERTS)
    if experts is None:
        return None, core.num_layers, 0
    first = r.integer("first_k_dense_replace", 0, minimum=0)
    freq = r.integer("moe_layer_freq", 1)
    n_moe = sum(1 for i in range(core.num_layers) if i >= first and i % freq == 0)
    if n_moe == 0:
        return None, core.num_layers, 0
    width = r.integer("moe_intermediate_size")
    shared = r.integer("n_shared_experts", 0, minimum=0)
    moe = MoeSpec(
        num_experts=experts,
        top_k=r.integer("num_experts_per_tok", maximum=MAX_TOP_K),
        expert_intermediate_size=width,
        num_moe_layers=n_moe,
        num_shared_experts=shared,
        shared_intermediate_size=shared * width,
    )
    bias = experts * n_moe if r.text("topk_method") == "noaux_tc" else 0
    return moe, core.num_layers - n_moe, bias


def parse_deepseek(r: ConfigReader, model_type: str) -> Fields:
    """Fields of a DeepSeek-family model; MLA for v2/v3/kimi_k2, standard MHA for v1."""
    core = read_core(r)
    moe, dense_layers, router_bias = deepseek_moe(r, core)
    norms = 2 * core.hidden
    fields = core.fields()
    if model_type in MLA_TYPES:
        mla = _mla(r)
        norms += (mla.q_lora_rank or 0) + mla.kv_lora_rank  # q_a_layernorm, kv_a_layernorm
        elements = mla.kv_lora_rank + mla.qk_rope_head_dim
        fields |= {"mla": mla, "attention": "mla", "head_dim": mla.qk_nope_head_dim + mla.qk_rope_head_dim}
    else:
        elements = core.kv_elements
        if r.flag("attention_bias", False):
            norms += core.qkv_bias + core.hidden
    return fields | {
        "intermediate_size": r.integer("intermediate_size"),
        "mlp_kind": "gated",
        "moe": moe,
        "num_dense_mlp_layers": dense_layers,
        "extra_params": core.num_layers * norms + core.hidden + router_bias,
        "kv_groups": (KvGroup(num_layers=core.num_layers, elements_per_token_per_layer=elements),),
    }

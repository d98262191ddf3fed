"""Older and non-HF decoder layouts with a plain 2-matrix MLP (up, down): gptj, falcon, mpt, opt,
bloom, phi (Phi-1/2), bert (encoder) and Megatron/NeMo GPT configs (gpt, gpt3, nemotron).

Biases and LayerNorm weight+bias pairs are counted into ``extra_params`` so that totals match the
checkpoints: e.g. the Megatron formula ``12·L·h² + 13·L·h + (V + s)·h`` (Narayanan et al. 2021,
eq. 1 with the bias/LN term) for the llm-foundry MPTs, and GPT-J's 6,050,882,784 tensors.
"""

from __future__ import annotations

from dataclasses import replace

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Core, Fields, attention_kind, kv_groups, mlp_kind_of, read_core


def _decoder_fields(r: ConfigReader, core: Core, *, width: int, extra: int, kind: str = "plain") -> Fields:
    return core.fields() | {
        "intermediate_size": width,
        "mlp_kind": kind,
        "extra_params": extra,
        "kv_groups": kv_groups(r, (False,) * core.num_layers, elements=core.kv_elements),
    }


def _with_kv(core: Core, kv_heads: int, r: ConfigReader, key: str) -> Core:
    if core.heads is not None and (kv_heads > core.heads or core.heads % kv_heads):
        raise r.error(key, f"gives {kv_heads} KV heads, which does not divide {core.heads} attention heads")
    return replace(core, kv_heads=kv_heads)


def parse_gptj(r: ConfigReader, _t: str) -> Fields:
    """GPT-J: parallel attention+MLP, biasless q/k/v/out, fc_in/fc_out with bias, lm_head with bias."""
    core = read_core(
        r,
        layers=("n_layer", "num_hidden_layers"),
        hidden=("n_embd", "hidden_size"),
        heads=("n_head", "num_attention_heads"),
        kv_heads=(),
        max_pos=("n_positions", "max_position_embeddings"),
    )
    width = r.integer("n_inner", 4 * core.hidden)
    per_layer = 2 * core.hidden + width + core.hidden
    extra = core.num_layers * per_layer + 2 * core.hidden + core.vocab
    return _decoder_fields(r, core, width=width, extra=extra)


def parse_falcon(r: ConfigReader, _t: str) -> Fields:
    """Falcon: fused query_key_value, 4h MLP, parallel attention; the new decoder architecture
    (40B/180B) has ``num_kv_heads`` and two LayerNorms per layer, the old one (7B) is MQA with one."""
    new_arch = r.flag("new_decoder_architecture", False)
    core = read_core(
        r,
        layers=("num_hidden_layers", "n_layer"),
        heads=("num_attention_heads", "n_head"),
        kv_heads=("num_kv_heads",) if new_arch else (),
        tie_default=True,
    )
    if not new_arch and r.flag("multi_query", True):
        core = _with_kv(core, 1, r, "multi_query")
    width = r.integer("ffn_hidden_size", 4 * core.hidden)
    old_norms = 1 if r.flag("parallel_attn", True) else 2
    norms = r.integer("num_ln_in_parallel_attn", 2) if new_arch else old_norms
    per_layer = 2 * core.hidden * norms
    if r.flag("bias", False):
        per_layer += core.qkv_bias + core.hidden + width + core.hidden
    return _decoder_fields(r, core, width=width, extra=core.num_layers * per_layer + 2 * core.hidden)


def parse_mpt(r: ConfigReader, _t: str) -> Fields:
    """MPT: fused Wqkv, ``expansion_ratio × d_model`` GELU MLP, tied embeddings; a learned position
    table of ``max_seq_len`` rows unless ALiBi/RoPE is on (llm-foundry turns it off then);
    ``no_bias`` removes every bias, LayerNorm biases included."""
    attn = r.sub("attn_config")
    core = read_core(
        r,
        layers=("n_layers",),
        hidden=("d_model",),
        heads=("n_heads",),
        kv_heads=(),
        max_pos=("max_seq_len",),
        tie_default=True,
    )
    attn_type = attn.text("attn_type", "multihead_attention")
    if attn_type == "multiquery_attention":
        core = _with_kv(core, 1, attn, "attn_type")
    elif attn_type == "grouped_query_attention":
        core = _with_kv(core, attn.integer("kv_n_heads"), attn, "kv_n_heads")
    width = max(1, round(r.number("expansion_ratio", 4) * core.hidden))
    bias = not r.flag("no_bias", False)
    norm = core.hidden * (2 if bias else 1)
    per_layer = 2 * norm + ((core.qkv_bias + core.hidden + width + core.hidden) if bias else 0)
    relative = attn.flag("alibi", False) or attn.flag("rope", False)
    positional = r.flag("learned_pos_emb", True) and not relative
    rows = r.integer("max_seq_len") if positional else 0
    fields = _decoder_fields(r, core, width=width, extra=core.num_layers * per_layer + norm)
    return fields | {"learned_position_embeddings": rows}


def parse_opt(r: ConfigReader, _t: str) -> Fields:
    """OPT: learned positions with a 2-row offset (``max_position_embeddings + 2``), biases
    everywhere, pre-LN; ``word_embed_proj_dim`` ≠ hidden adds project_in/out (OPT-350m)."""
    core = read_core(r, kv_heads=(), tie_default=True)
    width = r.integer("ffn_dim")
    proj = r.integer("word_embed_proj_dim", core.hidden)
    ln = 2 * core.hidden if r.flag("layer_norm_elementwise_affine", True) else 0
    bias = 4 * core.hidden + width + core.hidden if r.flag("enable_bias", True) else 0
    extra = core.num_layers * (2 * ln + bias)
    extra += ln if r.flag("do_layer_norm_before", True) else 0
    extra += 2 * proj * core.hidden if proj != core.hidden else 0
    rows = r.integer("max_position_embeddings") + 2
    fields = _decoder_fields(r, core, width=width, extra=extra)
    embedding_dim = proj if proj != core.hidden else None
    return fields | {"learned_position_embeddings": rows, "embedding_dim": embedding_dim}


def parse_bloom(r: ConfigReader, _t: str) -> Fields:
    """BLOOM: ALiBi, LayerNorm after the embedding, 4h GELU MLP, biases (13·h per layer), tied."""
    core = read_core(
        r,
        layers=("n_layer", "num_hidden_layers"),
        hidden=("hidden_size", "n_embed"),
        heads=("n_head", "num_attention_heads"),
        kv_heads=(),
        max_pos=("seq_length",),
        tie_default=True,
    )
    width = 4 * core.hidden
    extra = core.num_layers * 13 * core.hidden + 4 * core.hidden
    return _decoder_fields(r, core, width=width, extra=extra)


def parse_phi(r: ConfigReader, _t: str) -> Fields:
    """Phi-1/1.5/2: parallel block with one LayerNorm, biased q/k/v/dense and fc1/fc2, lm_head bias."""
    core = read_core(r)
    width = r.integer("intermediate_size")
    per_layer = 2 * core.hidden + core.qkv_bias + core.hidden + width + core.hidden
    if r.flag("qk_layernorm", False):
        per_layer += 4 * (core.head_dim or 0)
    extra = core.num_layers * per_layer + 2 * core.hidden + core.vocab
    return _decoder_fields(r, core, width=width, extra=extra)


def parse_bert(r: ConfigReader, _t: str) -> Fields:
    """BERT encoder (``BertModel``: no MLM head; pooler included). Parameters only: an encoder has
    no KV cache, so ``kv_groups`` is empty."""
    core = read_core(r, kv_heads=(), tie_default=True)
    width = r.integer("intermediate_size")
    h = core.hidden
    absolute = (r.text("position_embedding_type", "absolute") or "absolute") == "absolute"
    rows = r.integer("max_position_embeddings") if absolute else 0
    per_layer = 4 * h + 2 * 2 * h + width + h
    extra = r.integer("type_vocab_size", 2, minimum=0) * h + 2 * h + core.num_layers * per_layer + h * h + h
    return core.fields() | {
        "intermediate_size": width,
        "mlp_kind": "plain",
        "extra_params": extra,
        "tie_word_embeddings": True,
        "learned_position_embeddings": rows,
        "kv_groups": (),
    }


def parse_megatron(r: ConfigReader, model_type: str) -> Fields:
    """Megatron-LM / NeMo GPT (``gpt``, ``gpt3``) and NeMo Nemotron (``nemotron``) configs.

    Megatron defaults where the config is silent: biases on, LayerNorm, learned absolute
    positions, tied embeddings for gpt/gpt3; Nemotron: RoPE, squared-ReLU plain MLP, untied.
    ``num_attention_heads`` may be null (Megatron 2021 table): attention is then counted as MHA
    with ``heads × head_dim = hidden``, which fixes parameters, FLOPs and MHA KV bytes alike.
    """
    nemotron = model_type == "nemotron"
    core = read_core(r, heads_optional=True, tie_default=not nemotron)
    kind = mlp_kind_of(r.text("hidden_act"), default="plain")
    width = r.integer("intermediate_size", 4 * core.hidden)
    bias = r.flag("bias", not nemotron)
    norm = core.hidden if r.text("normalization") == "rmsnorm" else 2 * core.hidden
    per_layer = 2 * norm
    if r.flag("attention_bias", bias):
        per_layer += core.qkv_bias + core.hidden
    if r.flag("mlp_bias", bias):
        per_layer += width * (2 if kind == "gated" else 1) + core.hidden
    pos_type = r.text("position_embedding_type", "rope" if nemotron else "learned_absolute")
    rows = r.integer("max_position_embeddings") if pos_type == "learned_absolute" else 0
    fields = _decoder_fields(r, core, width=width, extra=core.num_layers * per_layer + norm, kind=kind)
    kind_of_attention = attention_kind(core.heads, core.kv_heads)
    return fields | {"learned_position_embeddings": rows, "attention": kind_of_attention}

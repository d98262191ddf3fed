"""Parameter, FLOP and KV-cache arithmetic over a :class:`ModelSpec` (pure, keyword-only).

Parameters (elements, not bytes)::

    embedding  = vocab × embed_dim + learned_positions × hidden
    lm_head    = vocab × embed_dim            (0 when tied)
    attention  = hidden·q + 2·hidden·kv + q·hidden        per attention layer, q = heads·head_dim,
                                                          kv = kv_heads·head_dim
    MLA        = hidden·q_lora + q_lora·H·(nope+rope)     (or hidden·H·(nope+rope) without q_lora)
                 + hidden·(kv_lora+rope) + kv_lora·H·(nope+v) + H·v·hidden   (DeepSeek-V2 §2.1)
    dense MLP  = m·hidden·intermediate,  m = 3 (gated: gate, up, down) or 2 (plain: up, down)
    MoE layer  = E·expert + router hidden·E + shared m·hidden·shared_width (+ 2·hidden·latent)
    expert     = m·(latent or hidden)·expert_width + expert biases
    total      = embedding + lm_head + Σ layers + extra_params  (norms, biases, Mamba mixers)

``active`` is ``total`` minus the routed experts a token does not visit
(``(E − top_k) · expert · moe_layers``): embeddings and LM head included, as Mistral's 12.9B for
Mixtral-8x7B and Meta's 17B for Llama-4-Maverick count them.

FLOPs follow Kaplan et al. 2020 (arXiv:2001.08361 §2.1): a forward pass costs 2 FLOPs per
parameter a token uses (``2N``), excluding the embedding lookup but including the LM-head matmul,
plus attention ``2·2·n_heads·head_dim·ctx`` per attention layer for QKᵀ and A·V. ``extra_params``
(norms, biases, Mamba mixers) are counted at 2 FLOPs each as well: exact for the Mamba
projections that dominate it, negligible for norms and biases.
"""

from __future__ import annotations

from gpuplan.core.errors import UserInputError
from gpuplan.core.model.spec import ModelSpec, MoeSpec, ParamCounts


def _mats(spec: ModelSpec) -> int:
    return 3 if spec.mlp_kind == "gated" else 2


def _embed_dim(spec: ModelSpec) -> int:
    return spec.embedding_dim or spec.hidden_size


def _q_width(spec: ModelSpec) -> int:
    if spec.num_attention_heads and spec.head_dim:
        return spec.num_attention_heads * spec.head_dim
    return spec.hidden_size


def _kv_width(spec: ModelSpec) -> int:
    if spec.num_kv_heads and spec.head_dim:
        return spec.num_kv_heads * spec.head_dim
    return _q_width(spec)


def attention_params_per_layer(spec: ModelSpec) -> int:
    """Weights of one attention layer's projections (q, k, v, o; or the MLA projections)."""
    h = spec.hidden_size
    if spec.mla is not None:
        m, heads = spec.mla, spec.num_attention_heads or 1
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * heads * qk if m.q_lora_rank else h * heads * qk
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv = kv_a + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + heads * m.v_head_dim * h
    q, kv = _q_width(spec), _kv_width(spec)
    return h * q + 2 * h * kv + q * h


def expert_params(spec: ModelSpec, moe: MoeSpec) -> int:
    """One routed expert in one MoE layer (its matrices and biases)."""
    width_in = moe.latent_size or spec.hidden_size
    return _mats(spec) * width_in * moe.expert_intermediate_size + moe.expert_extra_params


def _moe_dense_params(spec: ModelSpec, moe: MoeSpec) -> int:
    """Per MoE layer, the parts every token uses: router, shared experts, latent projections."""
    h = spec.hidden_size
    latent = 2 * h * moe.latent_size if moe.latent_size else 0
    return h * moe.num_experts + _mats(spec) * h * moe.shared_intermediate_size + latent


def _layer_counts(spec: ModelSpec) -> tuple[int, int, int]:
    """(attention layers, dense-MLP layers, MoE layers)."""
    n_moe = spec.moe.num_moe_layers if spec.moe else 0
    attn = spec.num_layers if spec.num_attention_layers is None else spec.num_attention_layers
    dense = spec.num_layers - n_moe if spec.num_dense_mlp_layers is None else spec.num_dense_mlp_layers
    return attn, max(dense, 0), n_moe


def param_counts(spec: ModelSpec) -> ParamCounts:
    """Total, active and per-part parameter counts (module docstring gives the formulas)."""
    attn_layers, dense_layers, n_moe = _layer_counts(spec)
    embedding = spec.vocab_size * _embed_dim(spec) + spec.learned_position_embeddings * spec.hidden_size
    lm_head = 0 if spec.tie_word_embeddings else spec.vocab_size * _embed_dim(spec)
    dense = attn_layers * attention_params_per_layer(spec)
    dense += dense_layers * _mats(spec) * spec.hidden_size * spec.intermediate_size + spec.extra_params
    expert, routed, idle = 0, 0, 0
    if spec.moe is not None:
        expert = expert_params(spec, spec.moe)
        dense += n_moe * _moe_dense_params(spec, spec.moe)
        routed = n_moe * spec.moe.num_experts * expert
        idle = n_moe * (spec.moe.num_experts - spec.moe.top_k) * expert
    total = embedding + lm_head + dense + routed
    return ParamCounts(
        total=total,
        active=total - idle,
        embedding=embedding,
        lm_head=lm_head,
        expert_params_per_expert_per_layer=expert,
        dense_non_embedding=dense,
    )


def _has_lm_head(spec: ModelSpec) -> bool:
    """Decoders (any KV group, or attention-free like pure Mamba) end in an LM head; encoders not."""
    return bool(spec.kv_groups) or spec.attention == "none"


def matmul_flops_per_token(spec: ModelSpec) -> float:
    """Forward FLOPs of the weight matmuls for one token: ``2 × N_active`` (Kaplan et al. 2020),
    N excluding the input embedding lookup and including the LM head (also when tied)."""
    counts = param_counts(spec)
    return 2.0 * (counts.active - counts.embedding - counts.lm_head) + lm_head_flops_per_token(spec)


def lm_head_flops_per_token(spec: ModelSpec) -> float:
    """The LM-head part of ``matmul_flops_per_token`` (``2 × vocab × embed_dim``; 0 for encoders).
    Serving engines compute logits only at the positions they sample: a prompt pays it once, at its
    last token (vLLM gathers the sampled positions, TensorRT-LLM's ``gather_context_logits`` is off
    by default), a decode step once per sequence."""
    return 2.0 * spec.vocab_size * _embed_dim(spec) if _has_lm_head(spec) else 0.0


def routed_flops_per_token(spec: ModelSpec) -> float:
    """Forward FLOPs one token spends in its top-k routed experts (part of ``matmul_flops_per_token``)."""
    if spec.moe is None:
        return 0.0
    n_moe = _layer_counts(spec)[2]
    return 2.0 * n_moe * spec.moe.top_k * expert_params(spec, spec.moe)


def _attention_coefficient(spec: ModelSpec) -> float:
    """FLOPs per attended token in one attention layer: QKᵀ 2·H·d_qk plus A·V 2·H·d_v.
    MLA: d_qk = qk_nope + qk_rope, d_v = v_head_dim (DeepSeek-V2 §2.1)."""
    if spec.mla is not None:
        heads = spec.num_attention_heads or 1
        qk = spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim
        return 2.0 * heads * qk + 2.0 * heads * spec.mla.v_head_dim
    return 2.0 * 2.0 * _q_width(spec)


def _attention_groups(spec: ModelSpec) -> list[tuple[int, int | None]]:
    """(layers, window) for each group of attention layers; encoders: all attention layers, no window."""
    if spec.kv_groups:
        return [(g.num_layers, g.window_tokens) for g in spec.kv_groups]
    attn_layers = _layer_counts(spec)[0] if spec.attention != "none" else 0
    return [(attn_layers, None)] if attn_layers else []


def attention_flops_per_token(spec: ModelSpec, *, context_tokens: float) -> float:
    """Forward FLOPs of QKᵀ and A·V for ONE new token attending to ``context_tokens`` tokens:
    ``2·2·n_heads·head_dim·ctx`` per attention layer, ctx capped at the window on sliding layers."""
    if context_tokens < 0:
        raise UserInputError(f"context_tokens must be >= 0, got {context_tokens}")
    coef = _attention_coefficient(spec)
    groups = _attention_groups(spec)
    return sum(n * coef * (context_tokens if w is None else min(context_tokens, w)) for n, w in groups)


def _sum_capped(first: int, last: int, cap: int | None) -> int:
    """Σ_{t=first}^{last} min(t, cap) for 1 ≤ first ≤ last + 1 (closed form, exact)."""
    if last < first:
        return 0
    if cap is None or last <= cap:
        return (first + last) * (last - first + 1) // 2
    if first > cap:
        return cap * (last - first + 1)
    return (first + cap) * (cap - first + 1) // 2 + cap * (last - cap)


def prefill_flops(spec: ModelSpec, *, prompt_tokens: int, cached_tokens: int = 0) -> float:
    """Forward FLOPs to prefill ``prompt_tokens`` after ``cached_tokens`` (causal: token i, from 1,
    attends to ``cached + i`` tokens, itself included): ``2N·P + Σ_i attention(cached + i)``."""
    if prompt_tokens < 0 or cached_tokens < 0:
        raise UserInputError(f"token counts must be >= 0, got {prompt_tokens} and {cached_tokens}")
    coef = _attention_coefficient(spec)
    first, last = cached_tokens + 1, cached_tokens + prompt_tokens
    attention = sum(n * coef * _sum_capped(first, last, w) for n, w in _attention_groups(spec))
    return matmul_flops_per_token(spec) * prompt_tokens + attention


def decode_flops_per_token(spec: ModelSpec, *, context_tokens: float) -> float:
    """Forward FLOPs to decode one token with ``context_tokens`` in its attention context."""
    return matmul_flops_per_token(spec) + attention_flops_per_token(spec, context_tokens=context_tokens)


def training_flops_per_token(spec: ModelSpec, *, seq_len: int) -> float:
    """Training FLOPs per token: 3 × forward (backward ≈ 2 × forward, Kaplan et al. 2020), i.e.
    ``6N`` plus three times the mean causal attention cost over a ``seq_len`` sequence."""
    if seq_len < 1:
        raise UserInputError(f"seq_len must be >= 1, got {seq_len}")
    return 3.0 * prefill_flops(spec, prompt_tokens=seq_len) / seq_len


def kv_elements_per_token(spec: ModelSpec) -> int:
    """K+V (or MLA latent) elements one token adds over all layers, ignoring windows.

    Llama-3.1-8B: 2·32·8·128 = 65,536; DeepSeek-V3: 61·(512 + 64) = 35,136."""
    return sum(g.num_layers * g.elements_per_token_per_layer for g in spec.kv_groups)


def kv_elements_for_sequence(spec: ModelSpec, *, tokens: int) -> int:
    """KV elements a sequence of ``tokens`` holds, each sliding group keeping at most its window."""
    if tokens < 0:
        raise UserInputError(f"tokens must be >= 0, got {tokens}")
    total = 0
    for g in spec.kv_groups:
        kept = tokens if g.window_tokens is None else min(tokens, g.window_tokens)
        total += g.num_layers * g.elements_per_token_per_layer * kept
    return total

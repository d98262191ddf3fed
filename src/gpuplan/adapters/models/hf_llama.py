"""Llama-style pre-norm decoders: llama, mistral, mixtral, qwen2/qwen2_moe, qwen3/qwen3_moe, phi3,
gemma/gemma2/gemma3_text, llama4_text and gpt_oss.

All share q/k/v/o attention (GQA, ``head_dim`` respected when given) and a gated 3-matrix MLP.
What differs is counted into ``extra_params`` per family: RMSNorm weights (2 per layer; 4 in
Gemma 2/3), q/k/v biases (Qwen2, gpt-oss), q/k norms (Qwen3, Gemma 3), attention sinks (gpt-oss),
router and expert biases. Sliding-window layers become their own :class:`KvGroup`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Core, Fields, kv_groups, read_core, sliding_mask
from gpuplan.core.model.spec import MAX_EXPERTS, MAX_TOP_K, MoeSpec

MoeParts = tuple[MoeSpec | None, int, int]
"""(moe spec, number of dense-FFN layers, extra params the MoE adds outside its matrices)."""
MaskRule = Callable[[ConfigReader, int], tuple[bool, ...]]
MoeRule = Callable[[ConfigReader, Core], MoeParts]


def _no_sliding(r: ConfigReader, n: int) -> tuple[bool, ...]:
    return sliding_mask(r, n)


def _all_if_window(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Mistral / Phi-3: ``sliding_window`` set ⇒ every layer slides (Phi-3-mini: 2047)."""
    return sliding_mask(r, n, (lambda _i: True) if r.has("sliding_window") else None)


def _qwen_window(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Qwen2/3: only with ``use_sliding_window``, and only layers ≥ ``max_window_layers``."""
    if not (r.flag("use_sliding_window", False) and r.has("sliding_window")):
        return (False,) * n
    first = r.integer("max_window_layers", 0, minimum=0)
    return sliding_mask(r, n, lambda i: i >= first)


def _even_layers(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Gemma 2 and gpt-oss: layers 0, 2, 4, … are local, the odd ones global."""
    return sliding_mask(r, n, lambda i: i % 2 == 0)


def _gemma3_pattern(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Gemma 3: every ``sliding_window_pattern``-th layer (default 6) is global, the rest local."""
    pattern = r.integer("sliding_window_pattern", 6)
    return sliding_mask(r, n, lambda i: (i + 1) % pattern != 0)


def _llama4_chunks(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Llama 4: RoPE layers use chunked local attention of ``attention_chunk_size`` tokens; every
    4th layer is a global NoPE layer (``no_rope_layers``, HF default). A chunk bounds the KV a
    layer needs like a window of that size, so it is modelled as one."""
    if not r.has("attention_chunk_size"):
        return (False,) * n
    flags = r.int_list("no_rope_layers")
    if flags is None:
        return tuple((i + 1) % 4 != 0 for i in range(n))
    if len(flags) != n:
        raise r.error("no_rope_layers", f"has {len(flags)} entries for {n} layers")
    return tuple(bool(f) for f in flags)


def _dense(_r: ConfigReader, core: Core) -> MoeParts:
    return None, core.num_layers, 0


def _mixtral_moe(r: ConfigReader, core: Core) -> MoeParts:
    """Every layer is MoE; ``intermediate_size`` is the per-expert width."""
    moe = MoeSpec(
        num_experts=r.integer("num_local_experts", maximum=MAX_EXPERTS),
        top_k=r.integer("num_experts_per_tok", maximum=MAX_TOP_K),
        expert_intermediate_size=r.integer("intermediate_size"),
        num_moe_layers=core.num_layers,
    )
    return moe, 0, 0


def qwen_moe(r: ConfigReader, core: Core) -> MoeParts:
    """Qwen2/3-MoE: layer i is MoE unless listed in ``mlp_only_layers`` or off the
    ``decoder_sparse_step``; Qwen2-MoE adds a shared expert with a 1-wide sigmoid gate."""
    step = r.integer("decoder_sparse_step", 1)
    dense_only = set(r.int_list("mlp_only_layers") or ())
    n_moe = sum(1 for i in range(core.num_layers) if i not in dense_only and (i + 1) % step == 0)
    if n_moe == 0:
        return None, core.num_layers, 0
    shared = r.integer("shared_expert_intermediate_size", 0, minimum=0)
    moe = MoeSpec(
        num_experts=r.first_int(("num_experts", "num_local_experts"), maximum=MAX_EXPERTS),
        top_k=r.integer("num_experts_per_tok", maximum=MAX_TOP_K),
        expert_intermediate_size=r.integer("moe_intermediate_size"),
        num_moe_layers=n_moe,
        num_shared_experts=1 if shared else 0,
        shared_intermediate_size=shared,
    )
    return moe, core.num_layers - n_moe, (core.hidden * n_moe if shared else 0)


def _llama4_moe(r: ConfigReader, core: Core) -> MoeParts:
    """Llama 4: MoE on every ``interleave_moe_layer_step``-th layer (or the listed ``moe_layers``),
    one shared expert as wide as a routed one; dense layers use ``intermediate_size_mlp``."""
    listed = r.int_list("moe_layers")
    step = r.integer("interleave_moe_layer_step", 1)
    layers = set(listed) if listed is not None else set(range(step - 1, core.num_layers, step))
    n_moe = len({i for i in layers if i < core.num_layers})
    if n_moe == 0:
        return None, core.num_layers, 0
    width = r.integer("intermediate_size")
    moe = MoeSpec(
        num_experts=r.integer("num_local_experts", maximum=MAX_EXPERTS),
        top_k=r.integer("num_experts_per_tok", maximum=MAX_TOP_K),
        expert_intermediate_size=width,
        num_moe_layers=n_moe,
        num_shared_experts=1,
        shared_intermediate_size=width,
    )
    return moe, core.num_layers - n_moe, 0


def _gpt_oss_moe(r: ConfigReader, core: Core) -> MoeParts:
    """gpt-oss: every layer MoE; experts carry gate_up (2·inter) and down (hidden) biases, the
    router a bias per expert."""
    width = r.integer("intermediate_size")
    experts = r.integer("num_local_experts", maximum=MAX_EXPERTS)
    moe = MoeSpec(
        num_experts=experts,
        top_k=r.first_int(("num_experts_per_tok", "experts_per_token"), maximum=MAX_TOP_K),
        expert_intermediate_size=width,
        num_moe_layers=core.num_layers,
        expert_extra_params=2 * width + core.hidden,
    )
    return moe, 0, experts * core.num_layers


@dataclass(frozen=True)
class Family:
    """How one llama-style family differs from plain Llama."""

    norms_per_layer: int = 2
    qkv_bias: bool = False
    qk_norm: bool = False
    sinks: bool = False
    tie_default: bool = False
    mask: MaskRule = _no_sliding
    moe: MoeRule = _dense
    dense_width_key: str = "intermediate_size"


FAMILIES: dict[str, Family] = {
    "llama": Family(),
    "mistral": Family(mask=_all_if_window),
    "mixtral": Family(mask=_all_if_window, moe=_mixtral_moe),
    "phi3": Family(mask=_all_if_window),
    "qwen2": Family(qkv_bias=True, mask=_qwen_window),
    "qwen2_moe": Family(qkv_bias=True, mask=_qwen_window, moe=qwen_moe),
    "qwen3": Family(qk_norm=True, mask=_qwen_window),
    "qwen3_moe": Family(qk_norm=True, mask=_qwen_window, moe=qwen_moe),
    "gemma": Family(tie_default=True),
    "gemma2": Family(norms_per_layer=4, tie_default=True, mask=_even_layers),
    "gemma3_text": Family(norms_per_layer=4, qk_norm=True, tie_default=True, mask=_gemma3_pattern),
    "llama4_text": Family(mask=_llama4_chunks, moe=_llama4_moe, dense_width_key="intermediate_size_mlp"),
    "gpt_oss": Family(sinks=True, mask=_even_layers, moe=_gpt_oss_moe),
}


def _layer_extra(r: ConfigReader, core: Core, fam: Family, width: int) -> int:
    """Norm weights, biases, q/k norms and sinks of one layer."""
    extra = fam.norms_per_layer * core.hidden
    if fam.qkv_bias or r.flag("attention_bias", fam.sinks):
        extra += core.qkv_bias
    if r.flag("attention_bias", fam.sinks):
        extra += core.hidden
    if fam.qk_norm and r.flag("use_qk_norm", True):
        extra += 2 * (core.head_dim or 0)
    if fam.sinks:
        extra += core.heads or 0
    if r.flag("mlp_bias", False):
        extra += 2 * width + core.hidden
    return extra


def parse_llama_like(r: ConfigReader, model_type: str) -> Fields:
    """Fields of a llama-style decoder of ``model_type`` (a key of :data:`FAMILIES`)."""
    fam = FAMILIES[model_type]
    core = read_core(r, tie_default=fam.tie_default)
    moe, dense_layers, moe_extra = fam.moe(r, core)
    width = r.integer(fam.dense_width_key) if dense_layers else r.integer("intermediate_size", 1)
    mask = fam.mask(r, core.num_layers)
    window_key = "attention_chunk_size" if model_type == "llama4_text" else "sliding_window"
    extra = core.num_layers * _layer_extra(r, core, fam, width) + core.hidden + moe_extra
    return core.fields() | {
        "intermediate_size": width,
        "mlp_kind": "gated",
        "moe": moe,
        "num_dense_mlp_layers": dense_layers,
        "extra_params": extra,
        "kv_groups": kv_groups(r, mask, elements=core.kv_elements, window_key=window_key),
    }

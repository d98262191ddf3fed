"""NemotronH: hybrid Mamba-2 / attention / MLP / MoE stacks (Nemotron-H, NVIDIA-Nemotron-3).

Each block is ONE mixer behind one RMSNorm, named by ``hybrid_override_pattern`` (``M`` Mamba-2,
``*`` attention, ``-`` dense MLP, ``E`` MoE) or by ``layers_block_type``. So ``num_layers`` counts
blocks; only the ``*`` blocks have attention (``num_attention_layers``) and a KV cache, only ``-``
blocks a dense MLP, only ``E`` blocks experts. MLPs and experts are plain squared-ReLU (2 matrices).

Mamba-2 mixer parameters (HF ``NemotronHMamba2Mixer``), all counted into ``extra_params``, with
``d = mamba_num_heads × mamba_head_dim`` and ``conv = d + 2·n_groups·ssm_state_size``:
in_proj ``hidden × (d + conv + heads)``, depthwise conv1d ``conv × (conv_kernel + bias)``,
``dt_bias``/``A_log``/``D`` one per head, gated norm ``d``, out_proj ``d × hidden``.

The Mamba SSM state is a fixed-size per-sequence recurrent state, not a per-token cache, so it is
NOT in ``kv_groups`` (only the attention blocks hold KV per token) but in ``recurrent_state_bytes``:
per Mamba layer ``heads × head_dim × ssm_state_size`` SSM elements in ``mamba_ssm_cache_dtype``
(float32 in the Nemotron-3 configs) plus ``conv × (conv_kernel − 1)`` convolution elements in the
model dtype (vLLM ``MambaStateShapeCalculator.mamba2_state_shape``). Nemotron-3-Nano: 23 layers ×
(524,288 × 4 + 18,432 × 2) B = 46.9 MiB per sequence.

LatentMoE (``moe_latent_size``, Nemotron-3 Super/Ultra): routed experts run in the latent width,
with one ``hidden → latent`` and one ``latent → hidden`` projection per MoE block; the router
and the shared expert work on the full hidden width.
"""

from __future__ import annotations

from collections import Counter

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Core, Fields, read_core
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.model.spec import MAX_EXPERTS, MAX_LAYERS, MAX_TOP_K, KvGroup, MoeSpec

_BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _pattern(r: ConfigReader) -> str:
    """The block pattern as a string over ``M * - E``."""
    pattern = r.text("hybrid_override_pattern")
    if pattern is None:
        names = r.str_list("layers_block_type")
        if names is None:
            raise r.missing("hybrid_override_pattern", "a string over M, *, -, E (or 'layers_block_type')")
        unknown = sorted({n for n in names if n not in _BLOCK_TYPES})
        if unknown:
            raise r.error("layers_block_type", f"has entries {unknown} (expected {list(_BLOCK_TYPES)})")
        pattern = "".join(_BLOCK_TYPES[n] for n in names)
    bad = sorted(set(pattern) - set(_BLOCK_TYPES.values()))
    if bad or not pattern:
        raise r.error("hybrid_override_pattern", f"has characters {bad} (expected a string over M * - E)")
    layers = r.opt_int("num_hidden_layers", maximum=MAX_LAYERS)
    if layers is not None and layers != len(pattern):
        raise r.error("num_hidden_layers", f"= {layers} but the layer pattern has {len(pattern)} blocks")
    return pattern


def _mamba_dims(r: ConfigReader) -> tuple[int, int, int]:
    """(heads, inner width d = heads × head_dim, conv channels d + 2·n_groups·ssm_state_size)."""
    heads = r.integer("mamba_num_heads")
    inner = heads * r.integer("mamba_head_dim")
    return heads, inner, inner + 2 * r.integer("n_groups", 1) * r.integer("ssm_state_size")


def _mamba_params(r: ConfigReader, hidden: int) -> int:
    """One Mamba-2 mixer (see module docstring)."""
    heads, inner, conv = _mamba_dims(r)
    proj_bias = r.flag("use_bias", r.flag("mamba_proj_bias", False))
    in_proj = hidden * (inner + conv + heads) + ((inner + conv + heads) if proj_bias else 0)
    conv1d = conv * (r.integer("conv_kernel", 4) + (1 if r.flag("use_conv_bias", True) else 0))
    out_proj = inner * hidden + (hidden if proj_bias else 0)
    return in_proj + conv1d + 3 * heads + inner + out_proj


def _mamba_state_bytes(r: ConfigReader) -> float:
    """One sequence's state in one Mamba-2 layer: SSM state in ``mamba_ssm_cache_dtype`` ("auto", vLLM's
    default, is the 16-bit model dtype) + conv state in 16 bits."""
    _, inner, conv = _mamba_dims(r)
    cache_dtype = r.text("mamba_ssm_cache_dtype") or "auto"
    ssm_bytes = get_dtype("bf16" if cache_dtype == "auto" else cache_dtype).bytes_per_element
    conv_bytes = get_dtype("bf16").bytes_per_element
    return (
        inner * r.integer("ssm_state_size") * ssm_bytes
        + conv * (r.integer("conv_kernel", 4) - 1) * conv_bytes
    )


def _moe(r: ConfigReader, core: Core, n_moe: int) -> tuple[MoeSpec | None, int]:
    """(moe spec, extra params: router ``e_score_correction_bias`` per expert per MoE block)."""
    if n_moe == 0:
        return None, 0
    experts = r.integer("n_routed_experts", maximum=MAX_EXPERTS)
    has_shared = r.integer("n_shared_experts", 1, minimum=0) > 0
    shared = r.integer("moe_shared_expert_intermediate_size", 0, minimum=0) if has_shared else 0
    moe = MoeSpec(
        num_experts=experts,
        top_k=r.integer("num_experts_per_tok", maximum=MAX_TOP_K),
        expert_intermediate_size=r.integer("moe_intermediate_size"),
        num_moe_layers=n_moe,
        num_shared_experts=1 if shared else 0,
        shared_intermediate_size=shared,
        latent_size=r.opt_int("moe_latent_size"),
    )
    return moe, experts * n_moe


def parse_nemotron_h(r: ConfigReader, _t: str) -> Fields:
    """Fields of a NemotronH hybrid (see module docstring)."""
    pattern = _pattern(r)
    core = _core(r, len(pattern))
    counts = Counter(pattern)
    moe, router_bias = _moe(r, core, counts["E"])
    mlp_bias = r.flag("mlp_bias", False)
    width = r.integer("intermediate_size", 1)
    extra = len(pattern) * core.hidden + core.hidden  # one norm per block + final norm_f
    extra += counts["M"] * _mamba_params(r, core.hidden) + router_bias
    if r.flag("attention_bias", False):
        extra += counts["*"] * (core.qkv_bias + core.hidden)
    if mlp_bias:
        extra += counts["-"] * (width + core.hidden)
    attn = counts["*"]
    groups = (KvGroup(num_layers=attn, elements_per_token_per_layer=core.kv_elements),) if attn else ()
    fields = core.fields()
    if not counts["*"]:
        fields["attention"] = "none"
    return fields | {
        "intermediate_size": width,
        "mlp_kind": "plain",
        "moe": moe,
        "num_attention_layers": counts["*"],
        "num_dense_mlp_layers": counts["-"],
        "extra_params": extra,
        "kv_groups": groups,
        "recurrent_state_bytes": counts["M"] * _mamba_state_bytes(r) if counts["M"] else 0.0,
    }


def _core(r: ConfigReader, num_layers: int) -> Core:
    """The decoder core with the layer count taken from the pattern (Ultra has no num_hidden_layers)."""
    if r.has("num_hidden_layers"):
        return read_core(r)
    patched = dict(r.raw)
    patched["num_hidden_layers"] = num_layers
    return read_core(ConfigReader(patched, model_id=r.model_id, path=r.path))

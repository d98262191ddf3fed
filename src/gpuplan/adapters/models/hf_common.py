"""Pieces shared by the per-family config parsers: the decoder core, KV groups, metadata, assembly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.core.errors import FileFormatError, first_problem
from gpuplan.core.model.spec import (
    MAX_ATTENTION_HEADS,
    MAX_HEAD_DIM,
    MAX_HIDDEN_SIZE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB_SIZE,
    AttentionKind,
    KvGroup,
    ModelSpec,
)

Fields = dict[str, Any]
"""ModelSpec keyword arguments produced by a family parser (metadata is added by :func:`assemble`)."""

_DTYPES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
}
_SLIDING_TYPES = {"sliding_attention": True, "chunked_attention": True, "full_attention": False}


@dataclass(frozen=True)
class Core:
    """The dimensions every decoder has, read once per config."""

    num_layers: int
    hidden: int
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    vocab: int
    tie: bool
    max_pos: int | None

    @property
    def q_width(self) -> int:
        """Width of the query projection (``heads × head_dim``; ``hidden`` when heads are unknown)."""
        return self.heads * self.head_dim if self.heads and self.head_dim else self.hidden

    @property
    def kv_width(self) -> int:
        """Width of one of the K / V projections."""
        return self.kv_heads * self.head_dim if self.kv_heads and self.head_dim else self.q_width

    @property
    def kv_elements(self) -> int:
        """K+V elements one token stores in one attention layer."""
        return 2 * self.kv_width

    @property
    def qkv_bias(self) -> int:
        """Bias elements of separate q, k and v projections."""
        return self.q_width + 2 * self.kv_width

    def fields(self) -> Fields:
        """The ModelSpec fields the core fixes."""
        return {
            "num_layers": self.num_layers,
            "hidden_size": self.hidden,
            "vocab_size": self.vocab,
            "num_attention_heads": self.heads,
            "num_kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "tie_word_embeddings": self.tie,
            "max_position_embeddings": self.max_pos,
            "attention": attention_kind(self.heads, self.kv_heads),
        }


def attention_kind(heads: int | None, kv_heads: int | None) -> AttentionKind:
    """mha when every query head has its own K/V, mqa for one KV head, gqa in between."""
    if heads is None or kv_heads is None or kv_heads == heads:
        return "mha"
    return "mqa" if kv_heads == 1 else "gqa"


def read_core(
    r: ConfigReader,
    *,
    layers: Sequence[str] = ("num_hidden_layers",),
    hidden: Sequence[str] = ("hidden_size",),
    heads: Sequence[str] = ("num_attention_heads",),
    kv_heads: Sequence[str] = ("num_key_value_heads",),
    vocab: Sequence[str] = ("vocab_size",),
    max_pos: Sequence[str] = ("max_position_embeddings",),
    head_dim: Sequence[str] = ("head_dim",),
    tie_default: bool = False,
    heads_optional: bool = False,
) -> Core:
    """Read and cross-check layers, widths, heads (``head_dim`` respected when given) and vocab.

    Each size is bounded by its physical ceiling (``core.model.spec.MAX_*``) as it is read, so an
    absurd value is an error naming the key before any work scales with it."""
    hidden_size = r.first_int(hidden, maximum=MAX_HIDDEN_SIZE)
    if heads_optional:
        n_heads = _opt_first(r, heads, maximum=MAX_ATTENTION_HEADS)
    else:
        n_heads = r.first_int(heads, maximum=MAX_ATTENTION_HEADS)
    n_kv = _opt_first(r, kv_heads, maximum=MAX_ATTENTION_HEADS) or n_heads
    dim = _opt_first(r, head_dim, maximum=MAX_HEAD_DIM)
    if n_heads is not None and dim is None:
        if hidden_size % n_heads:
            raise r.error(heads[0], f"= {n_heads} does not divide hidden_size {hidden_size} (no 'head_dim')")
        dim = hidden_size // n_heads
    if n_heads is not None and n_kv is not None and n_heads % n_kv:
        raise r.error(kv_heads[0], f"= {n_kv} does not divide the {n_heads} attention heads")
    return Core(
        num_layers=r.first_int(layers, maximum=MAX_LAYERS),
        hidden=hidden_size,
        heads=n_heads,
        kv_heads=n_kv,
        head_dim=dim,
        vocab=r.first_int(vocab, maximum=MAX_VOCAB_SIZE),
        tie=r.flag("tie_word_embeddings", tie_default),
        max_pos=_opt_first(r, max_pos, maximum=MAX_POSITIONS),
    )


def _opt_first(r: ConfigReader, keys: Sequence[str], *, maximum: int) -> int | None:
    for key in keys:
        if r.has(key):
            return r.integer(key, maximum=maximum)
    return None


def sliding_mask(
    r: ConfigReader, num_layers: int, default: Callable[[int], bool] | None = None
) -> tuple[bool, ...]:
    """Which layers use local (sliding-window or chunked) attention.

    ``layer_types`` wins when present (gpt-oss, Gemma 3, recent transformers); otherwise the
    family's ``default(layer_index)`` rule; otherwise no layer slides.
    """
    types = r.str_list("layer_types")
    if types is None:
        return tuple(default(i) for i in range(num_layers)) if default else (False,) * num_layers
    if len(types) != num_layers:
        raise r.error("layer_types", f"has {len(types)} entries for {num_layers} layers")
    unknown = sorted({t for t in types if t not in _SLIDING_TYPES})
    if unknown:
        raise r.error("layer_types", f"has unknown entries {unknown} (expected {sorted(_SLIDING_TYPES)})")
    return tuple(_SLIDING_TYPES[t] for t in types)


def kv_groups(
    r: ConfigReader, mask: Sequence[bool], *, elements: int, window_key: str = "sliding_window"
) -> tuple[KvGroup, ...]:
    """Full-attention layers as one group and windowed layers as another (window from ``window_key``)."""
    sliding = sum(mask)
    full = len(mask) - sliding
    groups = [KvGroup(num_layers=full, elements_per_token_per_layer=elements)] if full else []
    if sliding:
        window = r.opt_int(window_key)
        if window is None:
            raise r.missing(window_key, "an int >= 1: some layers use local attention")
        groups.append(
            KvGroup(num_layers=sliding, elements_per_token_per_layer=elements, window_tokens=window)
        )
    return tuple(groups)


def mlp_kind_of(act: str | None, default: str = "gated") -> str:
    """gated (gate, up, down) for GLU activations, plain (up, down) for gelu/relu/relu²."""
    if act is None:
        return default
    act = act.lower()
    if act in {"swiglu", "geglu", "reglu", "silu", "swish"}:
        return "gated"
    return "plain"


def _reported(r: ConfigReader) -> tuple[float | None, float | None]:
    total = r.get_raw("_params_b_reported")
    active = r.get_raw("_active_params_b_reported")
    if isinstance(total, dict):
        active = total.get("active", active)
        total = total.get("total")
    for key, value in (("_params_b_reported", total), ("_active_params_b_reported", active)):
        numeric = isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e12
        if value is not None and (not numeric or not value > 0):
            raise r.error(key, "is not a positive number of billions")
    return (None if total is None else total * 1e9), (None if active is None else active * 1e9)


def _sources(r: ConfigReader) -> tuple[str, ...]:
    raw = r.get_raw("_source")
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list):
        return tuple(s for s in raw if isinstance(s, str))
    return ()


def assemble(root: ConfigReader, *, model_type: str, fields: Fields) -> ModelSpec:
    """Add id, dtype and provenance to a family's fields and validate into a ModelSpec.

    A pydantic ValidationError (a value the spec rejects) becomes a FileFormatError naming the field.
    """
    total, active = _reported(root)
    dtype_raw = root.text("torch_dtype") or root.text("dtype") or "bfloat16"
    meta: Fields = {
        "id": root.model_id,
        "model_type": model_type,
        "torch_dtype": _DTYPES.get(dtype_raw.lower(), "bf16"),
        "params_reported": total,
        "active_params_reported": active,
        "source": _sources(root),
    }
    try:
        return ModelSpec(**meta, **fields)
    except ValidationError as exc:
        where, msg = first_problem(exc)
        raise FileFormatError(
            f"config.json for {root.model_id}: derived field {where!r} is invalid: {msg}"
        ) from None

"""Parse a Hugging Face ``config.json`` dict into a :class:`ModelSpec` (pure, no I/O).

Dispatch is a table from ``model_type`` to a family parser (``hf_llama``, ``hf_deepseek``,
``hf_trust_remote_code``, ``hf_legacy``, ``hf_hybrid``, ``hf_glm4_moe``, ``hf_qwen3_next``).
Multimodal wrappers (``llama4``, ``gemma3``, ``mistral3``) are parsed from their ``text_config``.
Anything malformed raises
:class:`~gpuplan.core.errors.FileFormatError` naming the key and the model id; no other exception type
escapes :func:`parse_hf_config`.

Supported ``model_type`` values: see :data:`SUPPORTED_MODEL_TYPES`. A ``model_type`` written as
``"gpt (Megatron-LM 2021; no HF checkpoint)"`` (bundled non-HF configs) is read as its first word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from gpuplan.adapters.models.config_reader import ConfigReader
from gpuplan.adapters.models.hf_common import Fields, assemble
from gpuplan.adapters.models.hf_deepseek import parse_deepseek
from gpuplan.adapters.models.hf_glm4_moe import parse_glm4_moe
from gpuplan.adapters.models.hf_hybrid import parse_nemotron_h
from gpuplan.adapters.models.hf_legacy import (
    parse_bert,
    parse_bloom,
    parse_falcon,
    parse_gptj,
    parse_megatron,
    parse_mpt,
    parse_opt,
    parse_phi,
)
from gpuplan.adapters.models.hf_llama import FAMILIES, parse_llama_like
from gpuplan.adapters.models.hf_qwen3_next import parse_qwen3_next
from gpuplan.adapters.models.hf_trust_remote_code import parse_chatglm, parse_qwen_v1
from gpuplan.core.errors import FileFormatError, first_problem
from gpuplan.core.model.spec import ModelSpec

Parser = Callable[[ConfigReader, str], Fields]

_PARSERS: dict[str, Parser] = {
    **dict.fromkeys(FAMILIES, parse_llama_like),
    **dict.fromkeys(("deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2"), parse_deepseek),
    "qwen": parse_qwen_v1,
    "chatglm": parse_chatglm,
    "gptj": parse_gptj,
    **dict.fromkeys(("falcon", "RefinedWeb", "RefinedWebModel"), parse_falcon),
    "mpt": parse_mpt,
    "opt": parse_opt,
    "bloom": parse_bloom,
    "phi": parse_phi,
    "bert": parse_bert,
    **dict.fromkeys(("gpt", "gpt3", "nemotron"), parse_megatron),
    "nemotron_h": parse_nemotron_h,
    "glm4_moe": parse_glm4_moe,
    "qwen3_next": parse_qwen3_next,
}
_WRAPPERS: dict[str, str] = {"llama4": "llama4_text", "gemma3": "gemma3_text", "mistral3": "mistral"}
"""Multimodal model types whose language model is ``text_config`` (value: its default model_type)."""

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted({*_PARSERS, *_WRAPPERS}))


def _model_type(r: ConfigReader) -> str:
    raw = r.text("model_type")
    if raw is None or not raw.strip():
        raise r.missing("model_type", "a string such as 'llama'")
    words = raw.split("(")[0].split()
    name = words[0] if words else raw.strip()
    if name not in _PARSERS and name not in _WRAPPERS:
        supported = ", ".join(SUPPORTED_MODEL_TYPES)
        raise r.error("model_type", f"= {raw!r} is not supported (supported: {supported})")
    return name


def _fields(r: ConfigReader, model_type: str) -> Fields:
    if model_type not in _WRAPPERS:
        return _PARSERS[model_type](r, model_type)
    inner = r.sub("text_config", required=True)
    inner_type = inner.text("model_type", _WRAPPERS[model_type]) or _WRAPPERS[model_type]
    if inner_type not in _PARSERS or inner_type in _WRAPPERS:
        raise inner.error("model_type", f"= {inner_type!r} is not a supported text model type")
    return _PARSERS[inner_type](inner, inner_type)


def _check(r: ConfigReader, spec: ModelSpec) -> ModelSpec:
    if spec.moe is not None and spec.moe.top_k > spec.moe.num_experts:
        raise r.error("num_experts_per_tok", f"= {spec.moe.top_k} exceeds the {spec.moe.num_experts} experts")
    return spec


def parse_hf_config(config: Mapping[str, Any], *, model_id: str) -> ModelSpec:
    """The :class:`ModelSpec` of one HF-style ``config.json`` (already loaded as a mapping).

    Raises FileFormatError ("config.json for X: missing 'hidden_size' (expected an int >= 1)")
    for a missing, mistyped, non-positive or inconsistent value, and for an unsupported
    ``model_type``.
    """
    if not isinstance(config, Mapping):
        kind = type(config).__name__
        raise FileFormatError(f"config.json for {model_id}: expected a JSON object, got {kind}")
    r = ConfigReader(config, model_id=model_id)
    model_type = _model_type(r)
    try:
        fields = _fields(r, model_type)
    except ValidationError as exc:  # a MoeSpec / MlaSpec / KvGroup built by a family parser
        where, msg = first_problem(exc)
        raise FileFormatError(f"config.json for {model_id}: invalid {where!r}: {msg}") from None
    return _check(r, assemble(r, model_type=model_type, fields=fields))

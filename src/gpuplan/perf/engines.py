"""Serving-engine defaults that change memory accounting and batching, with where each comes from.

The same model on the same GPU gets a different KV pool and batch size on vLLM, TensorRT-LLM or
SGLang because each engine reserves memory and admits requests differently. Only the knobs the
performance and memory models read are kept here.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from gpuplan.errors import DataError, UnknownNameError
from gpuplan.frozen import FrozenModel

EngineName = Literal["vllm", "trtllm", "sglang", "lmdeploy", "tgi", "llamacpp", "mlc", "other"]
KvReservation = Literal["full", "current"]


class EngineProfile(FrozenModel):
    """What one engine family does by default."""

    name: EngineName
    max_num_seqs: int = Field(ge=1, description="largest decode batch")
    max_num_seqs_large_gpu: int = Field(ge=1, description="vLLM raises it on >= 70 GiB GPUs")
    max_batched_tokens: int = Field(ge=1, description="tokens per forward step (prefill chunk)")
    max_batched_tokens_large_gpu: int = Field(ge=1)
    kv_reservation: KvReservation = Field(
        description="'full': a request reserves KV for prompt + all output up front; 'current': pages on demand"
    )
    default_memory_utilization: float = Field(gt=0, le=1)
    block_size_tokens: int = Field(ge=1)
    source: str


def _load_engines() -> dict[str, EngineProfile]:
    """Read ``data/engines.yaml`` once; DataError names the entry that fails validation."""
    text = resources.files("gpuplan.perf").joinpath("data/engines.yaml").read_text(encoding="utf-8")
    profiles: dict[str, EngineProfile] = {}
    for index, entry in enumerate(yaml.safe_load(text)):
        try:
            profile = EngineProfile.model_validate(entry)
        except ValidationError as exc:
            raise DataError(f"engines.yaml entry {index}: {exc.errors()[0]['msg']}") from None
        profiles[profile.name] = profile
    return profiles


@lru_cache(maxsize=1)
def engines() -> dict[str, EngineProfile]:
    """Every engine profile by name (bundled data, read on first use)."""
    return _load_engines()


LARGE_GPU_GIB = 70.0
"""vLLM's threshold for its larger batching defaults (see the vllm entry of data/engines.yaml)."""


def get_engine(name: str) -> EngineProfile:
    """Engine profile by name (``vllm``, ``trtllm`` …), with did-you-mean on a miss."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = {"tensorrtllm": "trtllm", "tensorrt": "trtllm", "llama.cpp": "llamacpp"}.get(key, key)
    profiles = engines()
    if key not in profiles:
        raise UnknownNameError("engine", name, profiles)
    return profiles[key]


def batching_limits(engine: EngineProfile, *, usable_gib: float, gpu_id: str) -> tuple[int, int]:
    """(max_num_seqs, max_batched_tokens) the engine uses by default on this GPU."""
    large = usable_gib >= LARGE_GPU_GIB and "A100" not in gpu_id.upper()
    if large:
        return engine.max_num_seqs_large_gpu, engine.max_batched_tokens_large_gpu
    return engine.max_num_seqs, engine.max_batched_tokens


VLLM_V1_DEFAULT = (0, 8)
"""vLLM made the V1 engine the default in 0.8.0 (chunked prefill always on)."""
VLLM_HYBRID_KV = (0, 10)
"""vLLM 0.10 added the hybrid KV-cache manager: sliding-window layers stop holding the full context."""
VLLM_V0_MIN_BATCHED_TOKENS = 2048
"""V0 without chunked prefill profiles max(max_model_len, 2048) tokens in one step."""
VLLM_V0_CHUNKED_ABOVE_TOKENS = 32768
"""V0 turns chunked prefill on by itself for max_model_len > 32K, with 2048-token chunks
(vLLM 0.6-0.7 EngineArgs.create_engine_config)."""


def vllm_v0_batched_tokens(max_model_len: int) -> int:
    """Tokens vLLM V0 profiles in one step for a given context length."""
    if max_model_len > VLLM_V0_CHUNKED_ABOVE_TOKENS:
        return VLLM_V0_MIN_BATCHED_TOKENS
    return max(max_model_len, VLLM_V0_MIN_BATCHED_TOKENS)


def parse_version(raw: str | None) -> tuple[int, int] | None:
    """'0.10.1.1' → (0, 10); 'v0' → (0, 0); unknown → None (treated as a recent release)."""
    if not raw:
        return None
    text = raw.strip().lower()
    if text.startswith("v") and text[1:2].isdigit() and "." in text:
        text = text[1:]
    if text in ("v0", "0"):
        return (0, 0)
    if text == "v1":
        return VLLM_V1_DEFAULT
    parts = text.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return None


def is_vllm_v0(engine: EngineProfile, version: str | None) -> bool:
    parsed = parse_version(version)
    return engine.name == "vllm" and parsed is not None and parsed < VLLM_V1_DEFAULT


def window_aware(engine: EngineProfile, version: str | None) -> bool:
    """Whether sliding-window layers keep only their window (+ one prefill chunk) of KV."""
    parsed = parse_version(version)
    return not (engine.name == "vllm" and parsed is not None and parsed < VLLM_HYBRID_KV)

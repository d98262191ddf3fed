"""Serving-engine defaults that change memory accounting and batching, with where each comes from.

The same model on the same GPU gets a different KV pool and batch size on vLLM, TensorRT-LLM or
SGLang because each engine reserves memory and admits requests differently. Only the knobs the
performance and memory models read are kept here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.errors import UnknownNameError

EngineName = Literal["vllm", "trtllm", "sglang", "lmdeploy", "tgi", "llamacpp", "mlc", "other"]
KvReservation = Literal["full", "current"]

VLLM_ARG_UTILS_URL = "https://github.com/vllm-project/vllm/blob/v0.10.1/vllm/engine/arg_utils.py"
"""vLLM V1 picks max_num_batched_tokens / max_num_seqs by usage context and GPU memory (>= 70 GiB and
not an A100: 16384/8192 tokens and 1024 seqs; otherwise 8192/2048 tokens and 256 seqs)."""
TRTLLM_BENCH_URL = "https://nvidia.github.io/TensorRT-LLM/performance/perf-benchmarking.html"
"""trtllm-bench: max batch size 2048 and max_num_tokens 8192 by default; the capacity scheduler
defaults to GUARANTEED_NO_EVICT, which reserves KV blocks for the full output of every request."""


class EngineProfile(BaseModel):
    """What one engine family does by default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


ENGINES: dict[str, EngineProfile] = {
    e.name: e
    for e in (
        EngineProfile(
            name="vllm",
            max_num_seqs=256,
            max_num_seqs_large_gpu=1024,
            max_batched_tokens=8192,
            max_batched_tokens_large_gpu=16384,
            kv_reservation="current",
            default_memory_utilization=0.9,
            block_size_tokens=16,
            source=VLLM_ARG_UTILS_URL,
        ),
        EngineProfile(
            name="trtllm",
            max_num_seqs=2048,
            max_num_seqs_large_gpu=2048,
            max_batched_tokens=8192,
            max_batched_tokens_large_gpu=8192,
            kv_reservation="full",
            default_memory_utilization=0.9,
            block_size_tokens=32,
            source=TRTLLM_BENCH_URL,
        ),
        EngineProfile(
            name="sglang",
            max_num_seqs=1024,
            max_num_seqs_large_gpu=1024,
            max_batched_tokens=8192,
            max_batched_tokens_large_gpu=16384,
            kv_reservation="current",
            default_memory_utilization=0.88,
            block_size_tokens=1,
            source="https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py",
        ),
        EngineProfile(
            name="lmdeploy",
            max_num_seqs=256,
            max_num_seqs_large_gpu=256,
            max_batched_tokens=8192,
            max_batched_tokens_large_gpu=8192,
            kv_reservation="current",
            default_memory_utilization=0.8,
            block_size_tokens=64,
            source="https://lmdeploy.readthedocs.io/en/latest/api/pipeline.html",
        ),
        EngineProfile(
            name="tgi",
            max_num_seqs=128,
            max_num_seqs_large_gpu=128,
            max_batched_tokens=4096,
            max_batched_tokens_large_gpu=4096,
            kv_reservation="current",
            default_memory_utilization=0.9,
            block_size_tokens=16,
            source="https://huggingface.co/docs/text-generation-inference/reference/launcher",
        ),
        EngineProfile(
            name="llamacpp",
            max_num_seqs=1,
            max_num_seqs_large_gpu=1,
            max_batched_tokens=2048,
            max_batched_tokens_large_gpu=2048,
            kv_reservation="full",
            default_memory_utilization=0.95,
            block_size_tokens=1,
            source="https://github.com/ggml-org/llama.cpp/tree/master/tools/server",
        ),
        EngineProfile(
            name="mlc",
            max_num_seqs=1,
            max_num_seqs_large_gpu=1,
            max_batched_tokens=2048,
            max_batched_tokens_large_gpu=2048,
            kv_reservation="full",
            default_memory_utilization=0.9,
            block_size_tokens=16,
            source="https://llm.mlc.ai/docs/deploy/cli.html",
        ),
        EngineProfile(
            name="other",
            max_num_seqs=256,
            max_num_seqs_large_gpu=256,
            max_batched_tokens=8192,
            max_batched_tokens_large_gpu=8192,
            kv_reservation="current",
            default_memory_utilization=0.9,
            block_size_tokens=16,
            source=VLLM_ARG_UTILS_URL,
        ),
    )
}

LARGE_GPU_GIB = 70.0
"""vLLM's threshold for its larger batching defaults (see VLLM_ARG_UTILS_URL)."""


def get_engine(name: str) -> EngineProfile:
    """Engine profile by name (``vllm``, ``trtllm`` …), with did-you-mean on a miss."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = {"tensorrtllm": "trtllm", "tensorrt": "trtllm", "llama.cpp": "llamacpp"}.get(key, key)
    if key not in ENGINES:
        raise UnknownNameError("engine", name, ENGINES)
    return ENGINES[key]


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

"""Serving-engine defaults that change memory accounting and batching, with where each comes from.

The same model on the same GPU gets a different KV pool and batch size on vLLM, TensorRT-LLM or
SGLang because each engine reserves memory and admits requests differently. Only the knobs the
performance and memory models read are kept here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gpuplan.core.errors import UnknownNameError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec

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

    def __str__(self) -> str:
        """The engine's name, as messages, tables and manifests print an engine."""
        return self.name


_SOURCES = {
    "vllm": "https://github.com/vllm-project/vllm/blob/v0.10.1/vllm/engine/arg_utils.py",
    "trtllm": "https://nvidia.github.io/TensorRT-LLM/performance/perf-benchmarking.html",
    "sglang": "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py",
    "lmdeploy": "https://lmdeploy.readthedocs.io/en/latest/api/pipeline.html",
    "tgi": "https://huggingface.co/docs/text-generation-inference/reference/launcher",
    "llamacpp": "https://github.com/ggml-org/llama.cpp/tree/master/tools/server",
    "mlc": "https://llm.mlc.ai/docs/deploy/cli.html",
    "other": "https://github.com/vllm-project/vllm/blob/v0.10.1/vllm/engine/arg_utils.py",
}
_FIELDS = (
    "name",
    "max_num_seqs",
    "max_num_seqs_large_gpu",
    "max_batched_tokens",
    "max_batched_tokens_large_gpu",
    "kv_reservation",
    "default_memory_utilization",
    "block_size_tokens",
)
_ROWS: tuple[tuple[str | int | float, ...], ...] = (
    # name, max_num_seqs (ordinary, large GPU), max_batched_tokens (ordinary, large GPU), kv_reservation,
    # default_memory_utilization, block_size_tokens; each engine's source is in _SOURCES
    # OpenAI API server defaults of vLLM V1 (usage context OPENAI_API_SERVER): 2048 tokens / 256 seqs,
    # 8192 tokens / 1024 seqs on >= 70 GiB non-A100 GPUs (EngineArgs._set_default_args_v1).
    ("vllm", 256, 1024, 2048, 8192, "current", 0.9, 16),
    # trtllm-bench / trtllm-serve: max batch 2048, max_num_tokens 8192; capacity scheduler
    # GUARANTEED_NO_EVICT reserves KV for the full output of each request.
    ("trtllm", 2048, 2048, 8192, 8192, "full", 0.9, 32),
    # mem_fraction_static ~0.88 on 80 GB GPUs; chunked_prefill_size 8192 (16384 on large GPUs); page size 1.
    ("sglang", 1024, 1024, 8192, 16384, "current", 0.88, 1),
    # TurboMind: max_batch_size 256, cache_max_entry_count 0.8, block 64.
    ("lmdeploy", 256, 256, 8192, 8192, "current", 0.8, 64),
    # max_batch_prefill_tokens 4096; max_concurrent_requests 128.
    ("tgi", 128, 128, 4096, 4096, "current", 0.9, 16),
    # llama-server: one slot by default (--parallel 1), batch 2048.
    ("llamacpp", 1, 1, 2048, 2048, "full", 0.95, 1),
    # mlc_llm chat/bench: single-stream decode.
    ("mlc", 1, 1, 2048, 2048, "full", 0.9, 16),
    # Unknown engine: vLLM-like continuous batching.
    ("other", 256, 256, 8192, 8192, "current", 0.9, 16),
)  # fmt: skip

ENGINE_PROFILES: tuple[EngineProfile, ...] = tuple(
    EngineProfile.model_validate({**dict(zip(_FIELDS, row, strict=True)), "source": _SOURCES[str(row[0])]})
    for row in _ROWS
)
"""Serving-engine defaults the memory and performance models read. max_num_seqs / max_batched_tokens:
decode batch limit and tokens per forward step, on ordinary GPUs and on "large" ones (vLLM: >= 70 GiB
and not an A100). kv_reservation: 'full' = a request reserves KV for prompt + all output when admitted;
'current' = pages on demand. Each entry names its source."""

_BY_NAME: dict[str, EngineProfile] = {profile.name: profile for profile in ENGINE_PROFILES}
VLLM = _BY_NAME["vllm"]
"""The default engine of a layout."""


def engines() -> dict[str, EngineProfile]:
    """Every engine profile by name."""
    return dict(_BY_NAME)


LARGE_GPU_GIB = 70.0
"""vLLM's threshold for its larger batching defaults (see the vllm entry of ENGINE_PROFILES)."""


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


VLLM_V0_MLA_UNCHUNKED = (
    "https://github.com/vllm-project/vllm/pull/12642 (vLLM 0.7.1: 'MLA is enabled; forcing chunked prefill "
    "and prefix caching to be disabled', still logged by the 0.7.3 release); "
    "https://github.com/vllm-project/vllm/pull/12639 (MLA chunked prefill, not on by default in V0)"
)
"""vLLM's V0 engine runs MLA models (DeepSeek-V2/V3) without chunked prefill."""


def unchunked_prefill_tokens(*, engine: EngineProfile, version: str | None, model: ModelSpec) -> int | None:
    """Tokens of one whole-prompt prefill step where the engine's release runs the model without
    chunked prefill (``VLLM_V0_MLA_UNCHUNKED``, which turns prefix caching off too): V0's
    ``max(max_model_len, 2048)`` at vLLM's default ``max_model_len``, the model's
    ``max_position_embeddings`` (a Layout carries no server ``max_model_len``; the context the
    models are built for is the longest request, not the server's limit); None where it chunks.
    Such a step holds whole prompts only and the decodes wait for it (vLLM V0's scheduler)."""
    if not (is_vllm_v0(engine, version) and model.mla is not None):
        return None
    return max(model.max_position_embeddings or VLLM_V0_MIN_BATCHED_TOKENS, VLLM_V0_MIN_BATCHED_TOKENS)


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


VLLM_ASYNC_SCHEDULING_DEFAULT = (0, 14)
"""vLLM schedules the next step while the current one runs (``--async-scheduling``) by default from
0.14 (https://github.com/vllm-project/vllm/pull/27614, the last item of the async-scheduling plan
https://github.com/vllm-project/vllm/issues/27679; the DigitalOcean vLLM 0.14.1 run report lists
"Async Scheduling: Enabled" with no flag given,
https://github.com/DO-Solutions/gtc-2026-doks/blob/541db4ef3094ca810331a007ed9454e4fe46b3c8/dev/vllm/benchmarks/phase0/20260224-185458/report.md)."""


ASYNC_SPECULATION = ("eagle", "mtp")
"""The speculative methods vLLM keeps async scheduling on with; it turns it off for the others
(https://github.com/vllm-project/vllm/pull/31998) and for pipeline parallelism (supported later:
https://github.com/vllm-project/vllm/pull/32359)."""


def schedules_ahead(engine: EngineProfile, version: str | None, layout: Any = None) -> bool:
    """Whether the engine's release plans step N+1 while step N runs: a request arriving during step N
    then starts in step N+2 (one step later than a synchronous scheduler starts it). Only a stated
    version turns it on (an unstated one keeps the engine's own behaviour, as its factors do); not with
    pipeline stages or a proposer other than ``ASYNC_SPECULATION`` (``layout``: a ``Layout``)."""
    parsed = parse_version(version)
    if not (engine.name == "vllm" and parsed is not None and parsed >= VLLM_ASYNC_SCHEDULING_DEFAULT):
        return False
    spec = None if layout is None else layout.speculative
    staged = layout is not None and layout.pp > 1
    return not staged and (spec is None or spec.method in ASYNC_SPECULATION)


def is_vllm_v0(engine: EngineProfile, version: str | None) -> bool:
    parsed = parse_version(version)
    return engine.name == "vllm" and parsed is not None and parsed < VLLM_V1_DEFAULT


def window_aware(engine: EngineProfile, version: str | None) -> bool:
    """Whether sliding-window layers keep only their window (+ one prefill chunk) of KV."""
    parsed = parse_version(version)
    return not (engine.name == "vllm" and parsed is not None and parsed < VLLM_HYBRID_KV)

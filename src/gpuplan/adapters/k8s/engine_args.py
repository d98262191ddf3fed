"""Serving engines as containers: image, port, health endpoint, and the CLI args derived from a plan.

Flags per engine (read at these versions):
- vLLM ``vllm serve`` (https://docs.vllm.ai/en/v0.10.1/cli/serve.html): --tensor-parallel-size,
  --pipeline-parallel-size, --max-model-len, --gpu-memory-utilization, --max-num-seqs,
  --quantization, --kv-cache-dtype; health ``GET /health``.
- SGLang ``python -m sglang.launch_server`` (https://docs.sglang.ai/backend/server_arguments.html):
  --tp-size, --pp-size, --context-length, --mem-fraction-static, --max-running-requests,
  --quantization, --kv-cache-dtype; health ``GET /health``.
- TGI ``text-generation-launcher`` (https://huggingface.co/docs/text-generation-inference/reference/launcher):
  --num-shard, --max-total-tokens, --max-input-tokens, --max-concurrent-requests, --quantize,
  --cuda-memory-fraction, --speculate (n-gram speculation without Medusa heads); health ``GET /health``.
  TGI has no pipeline parallelism, attention data parallelism or expert parallelism.

Parallelism (TP, PP, attention DP, EP) and speculative decoding of vLLM and SGLang: :mod:`parallel_args`.

Prefill/decode disaggregation (``disaggregation_flags``; TGI has no such mode):
- vLLM: ``--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`` on prefill and
  decode workers alike (the router, not ``kv_role``, decides who prefills), the NIXL side channel on
  ``VLLM_NIXL_SIDE_CHANNEL_HOST``/``_PORT`` (https://docs.vllm.ai/en/v0.11.0/features/nixl_connector_usage.html).
- SGLang: ``--disaggregation-mode prefill|decode``, ``--disaggregation-transfer-backend mooncake|nixl``,
  ``--disaggregation-bootstrap-port`` on prefill workers, ``--disaggregation-ib-device`` for RDMA
  (https://docs.sglang.ai/advanced_features/pd_disaggregation.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuplan.adapters.k8s.parallel_args import max_seqs_value, parallel_flags, speculative_flags
from gpuplan.core.dtypes import FP8
from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.layout import Layout

Engine = Literal["vllm", "sglang", "tgi"]
ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "tgi")
Role = Literal["prefill", "decode"]
"""A disaggregated pool's part: prompts (and the KV cache they make), or the tokens after them."""
DISAGGREGATING_ENGINES: tuple[Engine, ...] = ("vllm", "sglang")
"""Engines rendered with prefill and decode pools (module docstring)."""
VLLM_KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""vLLM's NIXL KV connector, as the NixlConnector usage guide starts both instances
(https://docs.vllm.ai/en/v0.11.0/features/nixl_connector_usage.html)."""
SGLANG_TRANSFER_BACKEND = "mooncake"
"""SGLang's default KV transfer engine (the other: ``nixl``;
https://docs.sglang.ai/advanced_features/pd_disaggregation.html)."""
SGLANG_BOOTSTRAP_PORT = 8998
"""SGLang's default ``--disaggregation-bootstrap-port`` on prefill workers, where decode workers
fetch the KV-cache handshake (``ServerArgs.disaggregation_bootstrap_port``, python/sglang/srt/server_args.py,
https://github.com/sgl-project/sglang)."""
CONTAINER_PORT = 8000
"""One unprivileged port for every engine (a non-root container cannot bind < 1024 under 'restricted')."""
IMAGES: dict[Engine, str] = {
    "vllm": "vllm/vllm-openai:v0.10.1",
    "sglang": "lmsysorg/sglang:v0.4.10",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.4",
}
"""Pinned release images for NVIDIA GPUs (Docker Hub vllm/vllm-openai, lmsysorg/sglang; GHCR huggingface/tgi)."""
ROCM_IMAGES: dict[str, dict[Engine, str]] = {
    "cdna3": {
        "vllm": "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909",
        "sglang": "lmsysorg/sglang:v0.4.10.post2-rocm630-mi30x",
    },
}
"""ROCm builds for AMD GPUs per architecture family, at the pinned engine releases: AMD's vLLM 0.10.1 on
ROCm 6.4.1 (a Docker Hub rocm/vllm tag, listed in https://github.com/ROCm/amdgpu-docs/issues/88) and
SGLang's MI300X/MI325X (gfx942) build of v0.4.10.post2 (``-rocm630-mi30x``, the tag public ROCm
benchmark and SpecForge scripts pull; AMD's SGLang benchmark history,
https://rocm.docs.amd.com/en/docs-7.1.1/how-to/rocm-for-ai/inference/benchmark-docker/previous-versions/sglang-history.html,
lists the ``lmsysorg/sglang:<version>-rocm630`` line). MI355X
(CDNA 4, ``-mi35x`` SGLang builds) is not in the catalog. TGI has no ROCm image pinned here, and
TensorRT-LLM (not a render engine) runs on NVIDIA only: both are refused on AMD."""
HEALTH_PATH: dict[Engine, str] = {"vllm": "/health", "sglang": "/health", "tgi": "/health"}
DEFAULT_MEMORY_FRACTION: dict[Engine, float] = {"vllm": 0.9, "sglang": 0.88, "tgi": 0.9}
"""Engine defaults of gpu_memory_utilization / mem_fraction_static / cuda_memory_fraction (docs/model.md)."""
QUANTIZATION: dict[Engine, dict[str, str | None]] = {
    "vllm": {"bf16": None, "fp16": None, "fp8": "fp8", "int4": None, "int8": None},
    "sglang": {"bf16": None, "fp16": None, "fp8": "fp8", "int4": None, "int8": None},
    "tgi": {"bf16": None, "fp16": None, "fp8": "fp8", "int4": None, "int8": "eetq"},
}
"""Weight dtype -> quantisation flag value; None: not passed (16-bit, or a pre-quantised checkpoint
whose own ``quantization_config`` decides: AWQ/GPTQ int4, W8A8 int8). fp8 is quantised at start-up
from the 16-bit checkpoint (vLLM and SGLang dynamic FP8, TGI ``--quantize fp8``), and TGI's int8 too
(EETQ, ``--quantize eetq``)."""
PRE_QUANTIZED_DTYPES: dict[Engine, frozenset[str]] = {
    "vllm": frozenset({"int4", "int8"}),
    "sglang": frozenset({"int4", "int8"}),
    "tgi": frozenset({"int4"}),
}
"""Weight formats the engine does not make from a 16-bit checkpoint at start-up: they need
``--checkpoint`` (vLLM refuses ``--quantization awq`` on a checkpoint without an AWQ
``quantization_config``)."""


@dataclass(frozen=True)
class EngineArgs:
    """What a pool asks of its engine: the plan's layout (TP, PP, weight and KV dtypes, share of GPU
    memory; its ``engine`` is what the plan was sized for, the flags follow the engine rendered) and
    the limits of a replica."""

    model: str
    layout: Layout
    max_model_len: int
    max_num_seqs: int
    checkpoint: str | None = None
    """The weights to load when they are not ``model``'s own (a pre-quantised repo); ``model`` is
    then the name clients ask for (``--served-model-name``)."""

    @property
    def weights(self) -> str:
        """The repo or path the engine loads."""
        return self.checkpoint or self.model


@dataclass(frozen=True)
class _SharedFlags:
    """How vLLM or SGLang spells the flags both take (module docstring)."""

    launcher: tuple[str, ...]
    """The command line up to the model path."""
    context: str
    max_seqs: str
    memory_fraction: str
    fp8_kv_cache: str
    """The ``--kv-cache-dtype`` value of an fp8 KV cache."""


_SHARED_FLAGS: dict[Engine, _SharedFlags] = {
    "vllm": _SharedFlags(
        launcher=("vllm", "serve"),
        context="--max-model-len",
        max_seqs="--max-num-seqs",
        memory_fraction="--gpu-memory-utilization",
        fp8_kv_cache="fp8",
    ),
    "sglang": _SharedFlags(
        launcher=("python3", "-m", "sglang.launch_server", "--model-path"),
        context="--context-length",
        max_seqs="--max-running-requests",
        memory_fraction="--mem-fraction-static",
        fp8_kv_cache="fp8_e5m2",
    ),
}


def _quant(engine: Engine, dtype: str) -> str | None:
    table = QUANTIZATION[engine]
    if dtype not in table:
        raise UserInputError(
            f"{engine} has no flag for {dtype} weights", hint=f"use one of {', '.join(sorted(table))}"
        )
    return table[dtype]


def _memory_fraction(engine: Engine, a: EngineArgs) -> str:
    return f"{a.layout.gpu_memory_utilization or DEFAULT_MEMORY_FRACTION[engine]:g}"


def command(engine: Engine, a: EngineArgs) -> list[str]:
    """The container command line (entrypoint included) for one replica."""
    dtype = a.layout.weight_dtype.name
    if dtype in PRE_QUANTIZED_DTYPES[engine] and a.checkpoint is None:
        raise UserInputError(
            f"{dtype} weights of {a.model} need a pre-quantised checkpoint: {engine} cannot make them "
            f"from {a.model} at start-up",
            hint=f"pass --checkpoint REPO (a pre-quantised {dtype} repo of {a.model}: AWQ/GPTQ int4, "
            "W8A8 or GPTQ int8), or plan with --dtypes bf16,fp8",
        )
    return _tgi(a) if engine == "tgi" else _vllm_or_sglang(engine, a)


def _vllm_or_sglang(engine: Literal["vllm", "sglang"], a: EngineArgs) -> list[str]:
    flags, layout = _SHARED_FLAGS[engine], a.layout
    args = [
        *flags.launcher,
        a.weights,
        "--host",
        "0.0.0.0",
        "--port",
        str(CONTAINER_PORT),
        *parallel_flags(engine, layout),
        flags.context,
        str(a.max_model_len),
        flags.max_seqs,
        str(max_seqs_value(engine, layout, a.max_num_seqs)),
        flags.memory_fraction,
        _memory_fraction(engine, a),
        *speculative_flags(engine, layout.speculative),
    ]
    if quant := _quant(engine, layout.weight_dtype.name):
        args += ["--quantization", quant]
    if layout.resolved_kv_dtype == FP8:
        args += ["--kv-cache-dtype", flags.fp8_kv_cache]
    if a.checkpoint is not None:
        args += ["--served-model-name", a.model]
    return args


def _tgi_refusals(layout: Layout) -> None:
    """One-line errors for what TGI cannot run: PP, attention DP, EP, speculation other than n-gram."""
    if layout.pp > 1:
        raise UserInputError(
            f"TGI has no pipeline parallelism but the plan uses pp={layout.pp}",
            hint="render with --engine vllm or sglang, or pick a plan with pp=1",
        )
    if layout.attention_dp > 1 or layout.ep > 1:
        raise UserInputError(
            f"TGI has no attention data parallelism or expert parallelism but the plan uses "
            f"attention_dp={layout.attention_dp} ep={layout.ep}",
            hint="render with --engine vllm or sglang",
        )
    spec = layout.speculative
    if spec is not None and spec.method != "ngram":
        raise UserInputError(
            f"--spec-method {spec.method} is not rendered for tgi (its --speculate is n-gram or Medusa heads)",
            hint="render with --engine vllm or sglang, or re-plan with --spec-method ngram",
        )


def _tgi(a: EngineArgs) -> list[str]:
    _tgi_refusals(a.layout)
    args = [
        "text-generation-launcher",
        "--model-id",
        a.weights,
        "--hostname",
        "0.0.0.0",
        "--port",
        str(CONTAINER_PORT),
        "--num-shard",
        str(a.layout.tp),
        "--max-total-tokens",
        str(a.max_model_len),
        "--max-input-tokens",
        str(max(a.max_model_len - 1, 1)),
        "--max-concurrent-requests",
        str(a.max_num_seqs),
        "--cuda-memory-fraction",
        _memory_fraction("tgi", a),
    ]
    if quant := _quant("tgi", a.layout.weight_dtype.name):
        args += ["--quantize", quant]
    if a.layout.speculative is not None:
        args += ["--speculate", str(a.layout.speculative.draft_tokens)]
    return args


def image(engine: Engine, vendor: str, family: str | None) -> str:
    """The engine's image for the pool's GPU: the pinned CUDA build, or the ROCm build of an AMD family."""
    if vendor == "NVIDIA":
        return IMAGES[engine]
    by_engine = ROCM_IMAGES.get(family or "", {})
    if engine not in by_engine:
        raise UserInputError(
            f"--engine {engine} has no ROCm image pinned for {vendor} {family} GPUs",
            hint=f"render with --engine {' or '.join(by_engine) or 'vllm or sglang'} on AMD GPUs",
        )
    return by_engine[engine]


def require_disaggregation(engine: Engine) -> None:
    """UserInputError naming ``--engine`` unless the engine has a prefill/decode disaggregated mode."""
    if engine not in DISAGGREGATING_ENGINES:
        raise UserInputError(
            f"--engine {engine} has no prefill/decode disaggregated mode but the plan is disaggregated",
            hint="render with --engine vllm or sglang, or re-plan with recommend --layouts aggregated",
        )


def disaggregation_flags(engine: Engine, role: Role) -> list[str]:
    """The flags that make a worker of ``engine`` the ``role`` of a prefill/decode pair."""
    require_disaggregation(engine)
    if engine == "vllm":
        return ["--kv-transfer-config", VLLM_KV_TRANSFER_CONFIG]
    flags = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", SGLANG_TRANSFER_BACKEND]
    return flags + (
        ["--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT)] if role == "prefill" else []
    )

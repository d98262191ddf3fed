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
  --cuda-memory-fraction; health ``GET /health``. TGI has no pipeline parallelism.

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
"""Pinned release images (Docker Hub vllm/vllm-openai, lmsysorg/sglang; GHCR huggingface/tgi)."""
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
    tp: str
    pp: str
    context: str
    max_seqs: str
    memory_fraction: str
    fp8_kv_cache: str
    """The ``--kv-cache-dtype`` value of an fp8 KV cache."""


_SHARED_FLAGS: dict[Engine, _SharedFlags] = {
    "vllm": _SharedFlags(
        launcher=("vllm", "serve"),
        tp="--tensor-parallel-size",
        pp="--pipeline-parallel-size",
        context="--max-model-len",
        max_seqs="--max-num-seqs",
        memory_fraction="--gpu-memory-utilization",
        fp8_kv_cache="fp8",
    ),
    "sglang": _SharedFlags(
        launcher=("python3", "-m", "sglang.launch_server", "--model-path"),
        tp="--tp-size",
        pp="--pp-size",
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


def _vllm_or_sglang(engine: Engine, a: EngineArgs) -> list[str]:
    flags, layout = _SHARED_FLAGS[engine], a.layout
    args = [
        *flags.launcher,
        a.weights,
        "--host",
        "0.0.0.0",
        "--port",
        str(CONTAINER_PORT),
        flags.tp,
        str(layout.tp),
        flags.pp,
        str(layout.pp),
        flags.context,
        str(a.max_model_len),
        flags.max_seqs,
        str(a.max_num_seqs),
        flags.memory_fraction,
        _memory_fraction(engine, a),
    ]
    if quant := _quant(engine, layout.weight_dtype.name):
        args += ["--quantization", quant]
    if layout.resolved_kv_dtype == FP8:
        args += ["--kv-cache-dtype", flags.fp8_kv_cache]
    if a.checkpoint is not None:
        args += ["--served-model-name", a.model]
    return args


def _tgi(a: EngineArgs) -> list[str]:
    if a.layout.pp > 1:
        raise UserInputError(
            f"TGI has no pipeline parallelism but the plan uses pp={a.layout.pp}",
            hint="render with --engine vllm or sglang, or pick a plan with pp=1",
        )
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
    return args


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

"""A deployment layout (GPU × TP × PP × EP × replicas, dtypes, engine) and its feasibility rules.

Rules (Megatron-LM / vLLM): TP must divide the attention heads (query heads; KV heads are split
when TP divides them, replicated otherwise, as vLLM does for GQA with TP > KV heads); PP must not
exceed the layer count; EP must divide the routed experts and is drawn from the TP×DP ranks.
"""

from __future__ import annotations

from pydantic import Field

from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec

TRTLLM_ENGINE = "trtllm"
"""The engine whose FP4 means NVIDIA ModelOpt NVFP4 checkpoints (see :meth:`Layout.resolved_kv_dtype`)."""


class Layout(FrozenModel):
    """How one model replica is spread over GPUs, and how many replicas run."""

    tp: int = Field(default=1, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=1024)
    ep: int = Field(default=1, ge=1, le=1024, description="expert-parallel degree (1 = experts split by TP)")
    replicas: int = Field(default=1, ge=1, le=100_000)
    weight_dtype: str = "bf16"
    kv_dtype: str | None = Field(default=None, description="None = same as the 16-bit compute dtype")
    engine: str = "vllm"
    engine_version: str | None = Field(default=None, description="e.g. '0.10.1'; 'v0' for vLLM's V0 engine")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def replica_label(self) -> str:
        """One replica in words, as plans' reasons name it: ``tp=2 pp=1, fp8``."""
        return f"tp={self.tp} pp={self.pp}, {self.weight_dtype}"

    def with_replicas(self, replicas: int) -> Layout:
        """The same replica layout, run ``replicas`` times."""
        return self.model_copy(update={"replicas": replicas})

    @property
    def resolved_kv_dtype(self) -> str:
        """KV dtype: explicit, else fp8 for fp8 weights (engines pair them), fp32 for fp32, else 16-bit.

        FP4 on TensorRT-LLM means an NVIDIA ModelOpt NVFP4 checkpoint, whose ``hf_quant_config.json``
        sets ``kv_cache_quant_algo: FP8``, so its KV cache is fp8. Other FP4 (MXFP4, e.g. gpt-oss) and
        INT4 checkpoints keep a 16-bit KV cache unless told otherwise (vLLM ``kv_cache_dtype=auto``).
        """
        if self.kv_dtype:
            return get_dtype(self.kv_dtype).name
        weight = get_dtype(self.weight_dtype).name
        if weight == "fp8" or (weight == "fp4" and self.engine == TRTLLM_ENGINE):
            return "fp8"
        return "fp32" if weight == "fp32" else "bf16"


def split_gpus(count: int, tp: int | None, pp: int, *, field: str) -> tuple[int, int]:
    """(tp, replicas) for ``count`` GPUs: TP defaults to count / pp; count must be tp × pp × replicas.

    ``field`` names the input in the error (``hardware.count``, ``--count``)."""
    tp = tp or count // max(pp, 1)
    if count < 1 or pp < 1 or tp < 1 or count % (tp * pp):
        raise UserInputError(
            f"{field}={count} is not a positive multiple of tp x pp = {tp} x {pp}",
            hint="make count = tp x pp x replicas",
        )
    return tp, count // (tp * pp)


def check_layout(model: ModelSpec, gpu: GpuSpec, layout: Layout) -> None:
    """Raise UserInputError naming the rule a layout breaks; return None when it is valid."""
    get_dtype(layout.weight_dtype)
    heads = model.num_attention_heads
    if heads is not None and heads % layout.tp != 0:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 64]
        raise UserInputError(
            f"tp={layout.tp} does not divide {model.id}'s {heads} attention heads",
            hint=f"use tp in {divisors}",
        )
    if layout.pp > model.num_layers:
        raise UserInputError(f"pp={layout.pp} exceeds {model.id}'s {model.num_layers} layers")
    if layout.ep > 1:
        if model.moe is None:
            raise UserInputError(
                f"ep={layout.ep} but {model.id} is not a mixture-of-experts model", hint="use ep=1"
            )
        if model.moe.num_experts % layout.ep != 0:
            raise UserInputError(
                f"ep={layout.ep} does not divide {model.id}'s {model.moe.num_experts} experts"
            )
        if layout.ep > layout.tp * layout.replicas:
            raise UserInputError(
                f"ep={layout.ep} exceeds the tp x replicas ranks ({layout.tp * layout.replicas})"
            )
    _check_dtype_support(gpu, layout)
    domain = gpu.interconnect.scale_up_domain_gpus
    if layout.tp > max(domain, 8) and layout.tp > 1:
        raise UserInputError(
            f"tp={layout.tp} spans more than one {gpu.id} node ({max(domain, 8)} GPUs)",
            hint="keep TP inside a node and use pp or replicas across nodes",
        )


EIGHT_BIT_FLOAT_OR_LESS = ("fp8", "fp4")
"""Weight formats whose kernels need Ampere (sm80) or newer: native FP8 on Ada/Hopper and FP4 on
Blackwell, weight-only Marlin kernels (W8A16, MXFP4) on Ampere (vLLM quantization support table,
https://docs.vllm.ai/en/latest/features/quantization/supported_hardware.html). A catalog GPU with no
bf16 tensor rate (Volta, Turing) predates them."""


def _check_dtype_support(gpu: GpuSpec, layout: Layout) -> None:
    if layout.weight_dtype in EIGHT_BIT_FLOAT_OR_LESS and gpu.dense_tflops.bf16 is None:
        raise UserInputError(
            f"{layout.weight_dtype} weights need an Ampere-or-newer GPU; {gpu.id} has no kernels for them",
            hint="use int8/int4 (AWQ, GPTQ) or fp16 weights on this GPU",
        )

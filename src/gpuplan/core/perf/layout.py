"""A deployment layout on one GPU type (TP × PP × EP × replicas, dtypes, engine) and its feasibility rules.

Rules (Megatron-LM / vLLM): TP must divide the attention heads (query heads; KV heads are split
when TP divides them, replicated otherwise, as vLLM does for GQA with TP > KV heads); PP must not
exceed the layer count. Experts: inside a TP group EP must divide the routed experts; across
``attention_dp`` data-parallel attention ranks (SGLang ``--enable-dp-attention``, vLLM
``--data-parallel-size`` with ``--enable-expert-parallel``) the routed experts are split over all
``tp x attention_dp`` GPUs of the replica, by EP (``ep = tp x attention_dp``, an all-to-all per MoE
layer, across nodes if need be; EPLB's redundant experts let EP leave a remainder) or by TP
(``ep = 1``, inside one node). ``core/perf/expert_parallel.py`` prices it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from pydantic import BeforeValidator, Field, PlainSerializer, PlainValidator
from pydantic_core import PydanticCustomError

from gpuplan.core.dtypes import BF16, FP4, FP8, FP32, DType, get_dtype
from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT, MAX_PARALLEL_DEGREE, GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_profiles import VLLM, EngineName, EngineProfile, get_engine
from gpuplan.core.perf.speculative import Speculative

TRTLLM_ENGINE: EngineName = "trtllm"
"""The engine whose FP4 means NVIDIA ModelOpt NVFP4 checkpoints (see :meth:`Layout.resolved_kv_dtype`)."""


_Named = TypeVar("_Named", DType, EngineProfile)


def _by_name(value: object, kind: type[_Named], lookup: Callable[[str], _Named]) -> _Named:
    """``value`` if it is a ``kind`` already, else the one its name looks up; an unknown name raises
    the lookup's :class:`UnknownNameError`, anything else the error of a ``str`` field."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        return lookup(value)
    raise PydanticCustomError("string_type", "Input should be a valid string")


def _dtype_by_name(value: object) -> DType:
    return _by_name(value, DType, get_dtype)


def _engine_by_name(value: object) -> EngineProfile:
    return _by_name(value, EngineProfile, get_engine)


def _none_when_empty(value: object) -> object:
    return None if value == "" else value


def _name(value: DType | EngineProfile) -> str:
    return value.name


# A plain validator (not a before one): like the str fields these were, a field takes a name only (or
# the object itself), never a dict of the object's fields.
_AS_NAME = PlainSerializer(_name, return_type=str)
DTypeByName = Annotated[DType, PlainValidator(_dtype_by_name, json_schema_input_type=str), _AS_NAME]
"""A dtype field: given by any name :func:`get_dtype` takes, written (and in JSON schemas) as the
canonical name."""
KvDTypeByName = Annotated[DTypeByName | None, BeforeValidator(_none_when_empty)]
"""An optional dtype field: None (or an empty name) means "follow the weights"."""
EngineByName = Annotated[EngineProfile, PlainValidator(_engine_by_name, json_schema_input_type=str), _AS_NAME]
"""An engine field: given by any name :func:`get_engine` takes, written (and in JSON schemas) as
the profile's name."""


class Layout(FrozenModel):
    """How one model replica is spread over GPUs, and how many replicas run."""

    tp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    ep: int = Field(
        default=1,
        ge=1,
        le=MAX_PARALLEL_DEGREE,
        description="expert-parallel degree (1 = experts split by TP)",
    )
    attention_dp: int = Field(
        default=1,
        ge=1,
        le=MAX_PARALLEL_DEGREE,
        description="data-parallel attention ranks sharing one expert set (1 = none); a replica is "
        "tp x pp x attention_dp GPUs",
    )
    replicas: int = Field(default=1, ge=1, le=MAX_GPU_COUNT)
    # The schema's default is the name (pydantic would write a validation-mode default field by field).
    weight_dtype: DTypeByName = Field(default=BF16, json_schema_extra={"default": BF16.name})
    kv_dtype: KvDTypeByName = Field(default=None, description="None = same as the 16-bit compute dtype")
    engine: EngineByName = Field(default=VLLM, json_schema_extra={"default": VLLM.name})
    engine_version: str | None = Field(default=None, description="e.g. '0.10.1'; 'v0' for vLLM's V0 engine")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    speculative: Speculative | None = Field(
        default=None, description="speculative decoding (core/perf/speculative.py); None = off"
    )

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica: its TP x PP group, times the attention-DP ranks sharing its experts."""
        return self.tp * self.pp * self.attention_dp

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def replica_label(self) -> str:
        """One replica in words, as plans' reasons name it: ``tp=2 pp=1, fp8`` (``tp=1 pp=1 dp=16 ep=16, fp8``
        with attention data parallelism)."""
        wide = f" dp={self.attention_dp} ep={self.ep}" if self.attention_dp > 1 else ""
        return f"tp={self.tp} pp={self.pp}{wide}, {self.weight_dtype}"

    def with_replicas(self, replicas: int) -> Layout:
        """The same replica layout, run ``replicas`` times."""
        return self.model_copy(update={"replicas": replicas})

    @property
    def resolved_kv_dtype(self) -> DType:
        """KV dtype: explicit, else fp8 for fp8 weights (engines pair them), fp32 for fp32, else 16-bit.

        FP4 on TensorRT-LLM means an NVIDIA ModelOpt NVFP4 checkpoint, whose ``hf_quant_config.json``
        sets ``kv_cache_quant_algo: FP8``, so its KV cache is fp8. Other FP4 (MXFP4, e.g. gpt-oss) and
        INT4 checkpoints keep a 16-bit KV cache unless told otherwise (vLLM ``kv_cache_dtype=auto``).
        """
        if self.kv_dtype is not None:
            return self.kv_dtype
        weight = self.weight_dtype
        if weight == FP8 or (weight == FP4 and self.engine.name == TRTLLM_ENGINE):
            return FP8
        return FP32 if weight == FP32 else BF16


def split_gpus(count: int, tp: int | None, pp: int, *, field: str, attention_dp: int = 1) -> tuple[int, int]:
    """(tp, replicas) for ``count`` GPUs: TP defaults to count / (pp × attention_dp); count must be
    tp × pp × attention_dp × replicas.

    ``field`` names the input in the error (``hardware.count``, ``--count``)."""
    dp = max(attention_dp, 1)
    tp = tp or count // max(pp * dp, 1)
    unit = tp * pp * dp
    if count < 1 or pp < 1 or tp < 1 or count % unit:
        what = f"tp x pp = {tp} x {pp}" if dp == 1 else f"tp x pp x attention_dp = {tp} x {pp} x {dp}"
        raise UserInputError(
            f"{field}={count} is not a positive multiple of {what}",
            hint="make count = tp x pp x replicas"
            if dp == 1
            else "make count = tp x pp x attention_dp x replicas",
        )
    return tp, count // unit


def tp_choices(heads: int, *, max_tp: int) -> list[int]:
    """The TP sizes up to ``max_tp`` that divide ``heads``: the work is ``max_tp`` steps (a GPU
    count), whatever the head count."""
    return [tp for tp in range(1, min(heads, max_tp) + 1) if heads % tp == 0]


def check_layout(model: ModelSpec, gpu: GpuSpec, layout: Layout) -> None:
    """Raise UserInputError naming the rule a layout breaks; return None when it is valid."""
    heads = model.num_attention_heads
    node_gpus = gpu.interconnect.node_gpus
    if heads is not None and heads % layout.tp != 0:
        raise UserInputError(
            f"tp={layout.tp} does not divide {model.id}'s {heads} attention heads",
            hint=f"use tp in {tp_choices(heads, max_tp=node_gpus)}",
        )
    if layout.pp > model.num_layers:
        raise UserInputError(f"pp={layout.pp} exceeds {model.id}'s {model.num_layers} layers")
    _check_experts(model, gpu, layout)
    _check_dtype_support(gpu, layout)
    if layout.tp > node_gpus and layout.tp > 1:
        raise UserInputError(
            f"tp={layout.tp} spans more than one {gpu.id} node ({node_gpus} GPUs)",
            hint="keep TP inside a node and use pp or replicas across nodes",
        )


def _check_experts(model: ModelSpec, gpu: GpuSpec, layout: Layout) -> None:
    """The expert rules of the module docstring: EP inside a TP group divides the experts; EP beyond
    it needs attention data parallelism over exactly ``tp x attention_dp`` ranks; experts split by TP
    over attention-DP ranks stay inside one node."""
    ep, tp, dp = layout.ep, layout.tp, layout.attention_dp
    if ep == 1 and dp == 1:
        return
    if model.moe is None:
        flag = f"ep={ep}" if ep > 1 else f"attention_dp={dp}"
        raise UserInputError(
            f"{flag} but {model.id} is not a mixture-of-experts model",
            hint="use ep=1 and attention_dp=1 (a dense model's data-parallel ranks are replicas)",
        )
    experts, ranks = model.moe.num_experts, tp * dp
    if ep > experts:
        raise UserInputError(f"ep={ep} exceeds {model.id}'s {experts} experts", hint=f"use ep <= {experts}")
    if dp == 1 and ep > tp:
        raise UserInputError(
            f"ep={ep} exceeds tp={tp}: experts spread beyond one TP group need attention data parallelism",
            hint=f"set attention_dp = ep / tp = {ep // tp} (ep = tp x attention_dp), or use ep <= tp",
        )
    if ep > 1 and ep <= tp and experts % ep != 0:
        raise UserInputError(f"ep={ep} does not divide {model.id}'s {experts} experts")
    if dp > 1 and ep not in (1, ranks):
        raise UserInputError(
            f"attention_dp={dp} with ep={ep}: the experts are split over all tp x attention_dp = {ranks} GPUs",
            hint=f"use ep={ranks} (expert parallelism, all-to-all) or ep=1 (experts split by TP)",
        )
    if dp > 1 and ep == 1 and ranks > gpu.interconnect.node_gpus:
        raise UserInputError(
            f"tp x attention_dp = {ranks} spans more than one {gpu.id} node ({gpu.interconnect.node_gpus} GPUs) "
            "with experts split by TP",
            hint=f"use ep={ranks} (expert parallelism across nodes) or keep tp x attention_dp inside a node",
        )


def _check_dtype_support(gpu: GpuSpec, layout: Layout) -> None:
    """Weights whose kernels need Ampere (``DType.kernels_need_ampere``) on a GPU without a bf16
    tensor rate (Volta, Turing) raise UserInputError."""
    if layout.weight_dtype == BF16 and gpu.dense_tflops.bf16 is None:
        raise UserInputError(
            f"bf16 weights need a GPU with bf16 math; {gpu.id} has none (engines refuse bf16 there)",
            hint="use --dtype fp16 (same size; vLLM's --dtype auto picks it on this GPU)",
        )
    if layout.weight_dtype.kernels_need_ampere and gpu.dense_tflops.bf16 is None:
        raise UserInputError(
            f"{layout.weight_dtype} weights need an Ampere-or-newer GPU; {gpu.id} has no kernels for them",
            hint="use int8/int4 (AWQ, GPTQ) or fp16 weights on this GPU",
        )

"""Turn a training.csv / memory.csv row into a model, a :class:`TrainingJob` and a :class:`TrainingLayout`.

Blank conditions get the framework's documented default (constants below); a row whose layout is
entirely blank on several GPUs gets the fastest layout that fits (the tool chooses, as the
validation README asks).
"""

from __future__ import annotations

import math
import re

from gpuplan.adapters.models.registry import get_model, model_for_seq_len
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.search import search_layouts
from gpuplan.core.training.spec import (
    Checkpointing,
    ComputeDtype,
    Method,
    TrainingJob,
    TrainingLayout,
    interleaved_chunks,
)
from gpuplan.usecases.validation.cases import Case, Skip

FSDP_FRAMEWORKS = frozenset({"llm-foundry", "torchtitan", "pytorch-fsdp", "nemo-automodel", "deepspeed"})
"""Frameworks that shard parameters (FSDP FULL_SHARD / ZeRO-3) by default (llm-foundry benchmark
yamls: fsdp_sharding=FULL_SHARD; torchtitan and NeMo AutoModel use FSDP2)."""
MEGATRON_FRAMEWORKS = frozenset({"nemo", "megatron-core", "megatron-lm", "megatron-bridge"})
"""Megatron's distributed optimizer shards optimizer states only (ZeRO-1)."""
CHECKPOINTING_DEFAULT: dict[str, Checkpointing] = {"hf-transformers": "full", "ms-swift": "full"}
"""Qwen's finetune.py and ms-swift turn on gradient checkpointing by default; others run without."""
PURE_BF16_FRAMEWORKS = frozenset({"torchtune"})
"""torchtune recipes train in bf16 without fp32 master weights (dtype: bf16)."""
INTERLEAVED_CHUNKS = 2
"""Model chunks per PP rank when a row says "interleaved" without the count: the smallest
interleaving (Narayanan et al. 2021 §2.2 evaluate v = 2 upward)."""
_VIRTUAL = re.compile(r"\bVP=(\d+)")
_PLAIN_SCHEDULE = re.compile(r"\b(1F1B|GPipe)\b", re.IGNORECASE)
MLPERF_CLOSED = "MLPerf Training closed division"
NVIDIA_MLPERF_STACKS = ("nvidia release", "nemo")
"""How a training.csv row names NVIDIA's MLPerf implementation (``framework_reported``: "PyTorch NVIDIA
Release 25.04", "NeMo Framework NVIDIA Release ...")."""
MLPERF_NVIDIA_DTYPE = "fp8"
"""NVIDIA's MLPerf Training implementations train in FP8: their ``config_common.sh`` exports
``FP8=True`` (llama2_70b_lora:
https://github.com/mlcommons/training_results_v5.0/blob/main/Supermicro/benchmarks/llama2_70b_lora/implementations/b200_nemo/config_common.sh,
https://github.com/mlcommons/training_results_v5.0/blob/main/Dell/benchmarks/llama2_70b_lora/implementations/nemo/config_common.sh;
gpt3: ``fp8: true`` in the Oracle 3,072-GPU v4.1 result logs), and every A-grade MLPerf training row
states FP8."""
MEMORY_METRICS = frozenset({"peak_gib_per_gpu", "peak_gib_total", "max_seq_len_fit", "fits"})


def framework_zero_stage(case: Case, num_gpus: int) -> int:
    raw = case.get("zero_stage")
    if raw:
        return int(float(raw))
    framework = case.get("framework")
    if num_gpus <= 1:
        return 0
    return 3 if framework in FSDP_FRAMEWORKS else 1 if framework in MEGATRON_FRAMEWORKS else 0


def method_of(case: Case) -> Method:
    raw = case.get("method")
    if raw in ("pretrain", "full_ft", "lora", "qlora"):
        return raw  # type: ignore[return-value]
    if raw == "freeze":
        raise Skip("freeze-tuning (partially frozen layers) is not modelled")
    raise Skip(f"method {raw!r} is not a training method")


def weight_dtype(raw: str) -> ComputeDtype:
    return raw if raw in ("fp8", "fp4", "fp16") else "bf16"  # type: ignore[return-value]


def nvidia_mlperf(case: Case) -> bool:
    """An MLPerf Training submission on NVIDIA's implementation (:data:`NVIDIA_MLPERF_STACKS`)."""
    notes = case.get("notes")
    return MLPERF_CLOSED in notes and any(name in notes.lower() for name in NVIDIA_MLPERF_STACKS)


def fused_kernels(case: Case) -> bool:
    """Megatron-Core stacks (NeMo, Megatron-LM/-Bridge, NVIDIA's MLPerf implementations) run Transformer
    Engine's fused kernels; the others run eager PyTorch blocks (``core.training.step.FUSED_LAUNCH_SHARE``)."""
    return case.get("framework") in MEGATRON_FRAMEWORKS or nvidia_mlperf(case)


def training_dtype(case: Case) -> str:
    """A training row's compute precision: as stated, else :data:`MLPERF_NVIDIA_DTYPE` for an MLPerf
    submission on NVIDIA's implementation, else blank (bf16 mixed precision)."""
    raw = case.get("dtype")
    return MLPERF_NVIDIA_DTYPE if not raw and nvidia_mlperf(case) else raw


def checkpointing_default(case: Case) -> Checkpointing:
    return CHECKPOINTING_DEFAULT.get(case.get("framework"), "none")


def _checkpointing(case: Case, key: str) -> Checkpointing:
    raw = case.get(key)
    if raw in ("none", "selective", "full"):
        return raw  # type: ignore[return-value]
    return checkpointing_default(case)


def row_model(case: Case, seq_len: int) -> ModelSpec:
    return model_for_seq_len(get_model(case.get("model")), seq_len)


def training_row(case: Case) -> tuple[TrainingJob, dict[str, int], int]:
    """(job, stated layout sizes, num_gpus) of a training.csv row."""
    seq = case.int_field("seq_len")
    gpus = case.int_field("num_gpus")
    if not seq or not gpus:
        raise Skip("seq_len or num_gpus not stated")
    sizes = {k: v for k in ("tp", "pp", "dp", "cp", "ep") if (v := case.int_field(k))}
    micro = case.int_field("micro_batch_size") or 1
    replicas = sizes.get("dp") or gpus // (sizes.get("tp", 1) * sizes.get("pp", 1) * sizes.get("cp", 1))
    gbs = case.int_field("global_batch_size") or micro * max(replicas, 1)
    job = TrainingJob(
        method=method_of(case),
        dtype=weight_dtype(training_dtype(case)),
        seq_len=seq,
        global_batch=gbs,
        allow_long_seq=True,
        kernel_launch="fused" if fused_kernels(case) else "eager",
    )
    return job, sizes, gpus


def virtual_stages(case: Case, pp: int) -> int:
    """Interleaved-pipeline chunks per rank: what the row states (NeMo ``VP=``, "interleaved"),
    1 for a plain "1F1B"/"GPipe" schedule, else the recipes' default interleaving
    (:func:`~gpuplan.core.training.spec.interleaved_chunks`): runs at PP ≥ 2 that name no schedule are
    large pretraining recipes, which interleave (NeMo recipes; Llama 3 paper §3.3.2)."""
    if pp <= 1:
        return 1
    notes = case.get("notes")
    found = _VIRTUAL.search(notes)
    if found:
        return max(int(found.group(1)), 1)
    if "interleaved" in notes.lower():
        return INTERLEAVED_CHUNKS
    if _PLAIN_SCHEDULE.search(notes):
        return 1
    return interleaved_chunks(get_model(case.get("model")), pp)


def training_layout(
    case: Case,
    model: ModelSpec,
    gpu: GpuSpec,
    job: TrainingJob,
    sizes: dict[str, int],
    gpus: int,
    cal: TrainingCalibration,
) -> TrainingLayout:
    """The row's layout; the fastest fitting one when the source does not state it."""
    if not sizes and gpus > 1:
        found = search_layouts(model, gpu, job, gpus, cal)
        if not found.candidates:
            raise Skip("no layout fits in memory")
        return found.candidates[0].layout
    tp, pp, cp = sizes.get("tp", 1), sizes.get("pp", 1), sizes.get("cp", 1)
    dp = sizes.get("dp") or max(gpus // (tp * pp * cp), 1)
    micro = case.int_field("micro_batch_size") or 1
    if job.global_batch % (micro * dp) or (pp > 1 and job.global_batch // (micro * dp) < pp):
        micro = 1  # torchtitan's local batch is split into 1-sequence pipeline micro-batches
    experts = model.moe.num_experts if model.moe else 1
    return TrainingLayout(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=sizes.get("ep") or math.gcd(experts, dp * cp),
        zero_stage=framework_zero_stage(case, dp * cp),
        micro_batch=micro,
        checkpointing=_checkpointing(case, "activation_checkpointing"),
        virtual_stages=virtual_stages(case, pp),
    )

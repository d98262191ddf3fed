"""Turn a memory.csv training row into a job, a layout and the framework's memory conventions.

A blank condition gets the framework's documented default (constants below, each with its source);
what a framework's number counts (live tensors, allocator reserve, whole device) is
:class:`MemoryOptions.counting`.
"""

from __future__ import annotations

import re
from typing import Any

from gpuplan.core.training.memory import MemoryOptions, zero_bucket_bytes
from gpuplan.core.training.spec import Checkpointing, Optimizer, TrainingJob, TrainingLayout
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.training_rows import (
    PURE_BF16_FRAMEWORKS,
    checkpointing_default,
    framework_zero_stage,
    method_of,
    virtual_stages,
    weight_dtype,
)

COUNTING = {"torchtune": "active", "torchtitan": "reserved", "unsloth": "reserved", "ms-swift": "reserved"}
"""torchtune logs ``peak_memory_active`` (torch ``active_bytes.all.peak``:
https://github.com/pytorch/torchtune/blob/main/torchtune/training/memory.py) and its README table is
"Peak Memory Active"; torchtitan logs ``max_reserved`` (``reserved_bytes.all.peak``:
https://github.com/pytorch/torchtitan/blob/main/torchtitan/components/metrics.py); Unsloth's
"VRAM budget" caps the caching allocator (reserved); ms-swift v1 reports
``torch.cuda.max_memory_reserved`` per device (swift/trainers/trainers.py, ``perf['memory']``:
https://github.com/modelscope/ms-swift/blob/46922151e06cdfc110882e182757674f12352f2c/swift/trainers/trainers.py).
Others: nvidia-smi."""
LOGITS = {"torchtune": "chunked", "unsloth": "fused"}
"""torchtune recipes default to ``CEWithChunkedOutputLoss`` (8 chunks); Unsloth uses Cut Cross-Entropy
(https://unsloth.ai/blog/llama3-3: "Apple's Cut Cross Entropy")."""
SELECTIVE_POLICY = {"torchtitan": "every_other_mm"}
"""torchtitan ``activation_checkpoint.mode=selective`` + ``selective_ac_option=op``: save every other matmul."""
TORCHTUNE_SINGLE_DEVICE_FULL: dict[str, Any] = {
    "optimizer": "paged_adamw_8bit",
    "optimizer_in_backward": True,
}
"""torchtune ``*_full_single_device.yaml`` recipes: ``bitsandbytes.optim.PagedAdamW8bit`` and
``optimizer_in_bwd: True`` (https://github.com/pytorch/torchtune/blob/main/recipes/configs/llama3_1/
8B_full_single_device.yaml); all recipes set ``enable_activation_checkpointing: True``."""
TORCHTUNE_FLAGS = (
    "baseline",
    "packed dataset",
    "compile",
    "chunked cross entropy",
    "activation checkpointing",
    "fuse optimizer step into backward",
    "activation offloading",
    "8-bit adamw",
)
"""torchtune README "Optimization flags" table: techniques applied cumulatively, reproduced with
``optimizer=torch.optim.AdamW optimizer_in_bwd=False`` unless a row adds them
(https://github.com/pytorch/torchtune/blob/main/README.md)."""
UNSLOTH_DEFAULTS: dict[str, Any] = {
    "checkpointing": "full",
    "activation_offload": True,
    "optimizer": "adamw_8bit",
}
"""Unsloth ``use_gradient_checkpointing="unsloth"`` offloads the checkpointed activations to host RAM
(https://unsloth.ai/blog/long-context); its notebooks train with ``optim="adamw_8bit"``
(https://github.com/unslothai/notebooks)."""
QWEN_FINETUNE = "qwen finetune.py"
"""How memory.csv names Qwen's own fine-tuning script in a row's notes (``framework_reported``)."""
QWEN_FINETUNE_LORA: dict[str, Any] = {"lora_rank": 64, "lora_targets": "all"}
"""Qwen finetune.py ``LoraArguments``: ``lora_r=64`` on ``c_attn, c_proj, w1, w2``, i.e. every linear
layer of a Qwen block (https://github.com/QwenLM/Qwen/blob/2df8e8ac450fa185c421a08b0090ef81826caa6e/finetune.py)."""
QWEN_FINETUNE_DEEPSPEED = {"qlora": 2, "full_ft": 3}
"""The ZeRO stage of the scripts behind Qwen's profiling table: Q-LoRA runs
``finetune_qlora_single_gpu.sh`` (``--fp16 --deepspeed finetune/ds_config_zero2.json``), full-parameter
runs ``finetune_ds.sh`` (``--bf16 --deepspeed finetune/ds_config_zero3.json``); LoRA runs
``finetune_lora_single_gpu.sh`` (bf16 autocast, no DeepSpeed)
(https://github.com/QwenLM/Qwen/tree/2df8e8ac450fa185c421a08b0090ef81826caa6e/finetune)."""
QWEN_ZERO2_REDUCE_BUCKET = 2e8
"""``reduce_bucket_size`` of Qwen's finetune/ds_config_zero2.json (with ``overlap_comm`` and
``contiguous_gradients`` on)."""
MS_SWIFT_LORA: dict[str, Any] = {"lora_rank": 8, "lora_targets": "attention"}
"""ms-swift v1 ``--lora_rank 8 --lora_target_modules DEFAULT`` (for Qwen ``c_attn``, the fused q/k/v):
https://github.com/modelscope/ms-swift/blob/46922151e06cdfc110882e182757674f12352f2c/docs/source_en/LLM/Benchmark.md."""
VARIABLE_LENGTH_FRAMEWORKS = frozenset({"ms-swift"})
"""ms-swift v1 pads each batch to its own longest sequence (``Template.data_collator``) and its
benchmark dataset runs 91 to 19,548 tokens, cut at ``--max_length``
(https://github.com/modelscope/ms-swift/blob/46922151e06cdfc110882e182757674f12352f2c/docs/source_en/LLM/Benchmark.md)."""
MS_SWIFT_ACCUMULATION = 16
"""ms-swift v1 ``gradient_accumulation_steps`` default ceil(16 / batch / world)
(https://github.com/modelscope/ms-swift/blob/v1.5.0/swift/llm/utils/argument.py)."""
_ACCUMULATION = re.compile(r"gradient accumulation (\d+)")
_FLAG = re.compile(r"torchtune \((?:\+ )?([^)]+)\)")
_LAYOUT_ITEM = re.compile(r"\b(dp_shard|dp|tp|pp|cp|ep)=(\d+)")


def _layout_note(case: Case) -> dict[str, int]:
    text = case.get("notes")
    found = (
        {k: int(v) for k, v in _LAYOUT_ITEM.findall(text.split("layout:", 1)[1])} if "layout:" in text else {}
    )
    if "dp_shard" in found:
        found["dp"] = found.pop("dp_shard")
    return found


def _flag_index(case: Case) -> int | None:
    """Position of a torchtune "Optimization flags" row in the cumulative table, None for other rows."""
    if "techniques cumulative" not in case.get("notes"):
        return None
    found = _FLAG.search(case.get("notes"))
    name = found.group(1).strip().lower() if found else ""
    if name not in TORCHTUNE_FLAGS:
        raise Skip(f"torchtune technique {name!r} is not one of the README table's")
    return TORCHTUNE_FLAGS.index(name)


def _flag_row_settings(index: int) -> dict[str, Any]:
    if index == 0:
        raise Skip("torchtune baseline is unpacked alpaca: real lengths are far below the stated max_seq_len")
    return {
        "logits": "chunked" if index >= TORCHTUNE_FLAGS.index("chunked cross entropy") else "full",
        "optimizer_in_backward": index >= TORCHTUNE_FLAGS.index("fuse optimizer step into backward"),
        "activation_offload": index >= TORCHTUNE_FLAGS.index("activation offloading"),
    }


def _deepspeed_settings(stage: int) -> dict[str, Any]:
    """What DeepSpeed's engine changes: no autocast (16-bit loss), an fp32 gradient copy, ZeRO-2 buckets."""
    buckets = zero_bucket_bytes(QWEN_ZERO2_REDUCE_BUCKET) if stage in (1, 2) else 0.0
    return {"logits": "half", "fp32_grad_copy": True, "bucket_bytes": buckets}


def _recipe_settings(case: Case) -> dict[str, Any]:
    """Defaults of the script a row names (Qwen finetune.py, ms-swift): ranks, targets, engine."""
    method = case.get("method")
    settings: dict[str, Any] = {}
    if case.get("framework") == "ms-swift":
        settings |= MS_SWIFT_LORA if method in ("lora", "qlora") else {}
        settings |= {"pure_bf16": True} if method == "full_ft" else {}
    if QWEN_FINETUNE in case.get("notes").lower():
        settings |= QWEN_FINETUNE_LORA if method in ("lora", "qlora") else {}
        stage = QWEN_FINETUNE_DEEPSPEED.get(method)
        settings |= _deepspeed_settings(stage) if stage is not None else {}
    return settings


def _framework_settings(case: Case, gpus: int) -> dict[str, Any]:
    """Settings the row leaves blank, from the framework's documented defaults."""
    framework = case.get("framework")
    notes = case.get("notes").lower()
    settings: dict[str, Any] = {"logits": LOGITS.get(framework, "full")} | _recipe_settings(case)
    if "activation offload" in notes:
        settings["activation_offload"] = True
    if framework == "unsloth":
        settings |= UNSLOTH_DEFAULTS
    if framework == "torchtune":
        index = _flag_index(case)
        if index is not None:
            return settings | _flag_row_settings(index)
        settings["checkpointing"] = "full"
        if gpus == 1 and case.get("method") == "full_ft" and not case.get("optimizer"):
            settings |= TORCHTUNE_SINGLE_DEVICE_FULL
    return settings


def _accumulation(case: Case, local: int, gpus: int) -> int:
    found = _ACCUMULATION.search(case.get("notes"))
    if found:
        return int(found.group(1))
    if case.get("framework") == "ms-swift":
        return max(-(-MS_SWIFT_ACCUMULATION // (local * gpus)), 1)
    return 1


def _checkpointing(case: Case, settings: dict[str, Any]) -> Checkpointing:
    raw = case.get("gradient_checkpointing")
    if raw in ("none", "selective", "full"):
        return raw  # type: ignore[return-value]
    default: Checkpointing = settings.get("checkpointing", checkpointing_default(case))
    return default


def _optimizer(case: Case, settings: dict[str, Any]) -> Optimizer:
    if case.get("optimizer") == "adamw_8bit":
        return "adamw_8bit"
    chosen: Optimizer = settings.get("optimizer", "adamw")
    return chosen


def memory_options(case: Case) -> MemoryOptions:
    """What the row's framework counts and how it computes the loss (module docstring)."""
    framework = case.get("framework")
    settings = _framework_settings(case, case.int_field("num_gpus") or 1)
    return MemoryOptions(
        pure_bf16=framework in PURE_BF16_FRAMEWORKS or settings.get("pure_bf16", False),
        counting=COUNTING.get(framework, "device"),
        logits=settings["logits"],
        selective_policy=SELECTIVE_POLICY.get(framework, "korthikanti"),
        fp32_grad_copy=settings.get("fp32_grad_copy", False),
        bucket_bytes=settings.get("bucket_bytes", 0.0),
        variable_lengths=framework in VARIABLE_LENGTH_FRAMEWORKS,
    )


def memory_row(case: Case) -> tuple[TrainingJob, TrainingLayout]:
    """(job, layout) of a memory.csv training row."""
    seq = case.int_field("seq_len") or 0
    gpus = case.int_field("num_gpus") or 1
    settings = _framework_settings(case, gpus)
    sizes = _layout_note(case)
    local = case.int_field("batch_size") or 1
    tp, pp, cp = sizes.get("tp", 1), sizes.get("pp", 1), sizes.get("cp", 1)
    micro = 1 if pp > 1 else local  # torchtitan splits the local batch into 1-sequence pipeline micro-batches
    naive_pipeline = not sizes and gpus > 1 and case.get("zero_stage") == ""
    if naive_pipeline:
        pp = gpus  # HF device_map="auto" splits layers over the GPUs (naive pipeline, no 1F1B schedule)
    dp = max(gpus // (tp * pp * cp), 1)
    rank = case.int_field("lora_rank") or settings.get("lora_rank")
    job = TrainingJob(
        method=method_of(case),
        dtype=weight_dtype(case.get("weight_dtype")),
        seq_len=max(seq, 1),
        global_batch=local * dp * _accumulation(case, local, dp),
        optimizer=_optimizer(case, settings),
        optimizer_in_backward=settings.get("optimizer_in_backward", False),
        allow_long_seq=True,
        **({"lora_rank": rank} if rank is not None else {}),
        lora_targets=settings.get("lora_targets", "all"),
    )
    notes = case.get("notes").lower()
    layout = TrainingLayout(
        tp=tp,
        pp=pp,
        cp=cp,
        dp=dp,
        zero_stage=framework_zero_stage(case, dp * cp),
        micro_batch=micro,
        checkpointing=_checkpointing(case, settings),
        cpu_offload="cpu offload" in notes,
        activation_offload=settings.get("activation_offload", False),
        virtual_stages=1 if naive_pipeline else virtual_stages(case, pp),
    )
    return job, layout

"""What a training or memory row's blanks become: the defaults of the script it names (Qwen finetune.py,
ms-swift), NVIDIA's MLPerf precision, fused kernels; and ``validate --by`` grouping."""

from __future__ import annotations

import pytest

from gpuplan.core.errors import UserInputError
from gpuplan.core.training.memory import zero_bucket_bytes
from gpuplan.usecases.validation.breakdown import breakdown, parse_by
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.memory_rows import memory_options, memory_row
from gpuplan.usecases.validation.predict import RowResult
from gpuplan.usecases.validation.training_rows import fused_kernels, training_dtype

QWEN_NOTES = "framework_reported=Qwen finetune.py (HF Transformers + PEFT; DeepSpeed) | batch 1"


def _memory_case(**fields: str) -> Case:
    base = {
        "framework": "hf-transformers",
        "model": "Qwen/Qwen-7B-Chat",
        "gpu": "A100-80GB-SXM",
        "num_gpus": "1",
        "method": "lora",
        "batch_size": "1",
        "seq_len": "2048",
        "notes": QWEN_NOTES,
    }
    return Case(
        schema_name="memory", id="M1", metric="peak_gib_per_gpu", value=1.0, quality="A", fields=base | fields
    )


def _training_case(**fields: str) -> Case:
    base = {
        "framework": "nemo",
        "model": "meta-llama/Llama-2-70b-hf",
        "gpu": "B200",
        "num_gpus": "8",
        "method": "lora",
        "seq_len": "8192",
        "global_batch_size": "8",
        "notes": "MLPerf Training closed division | framework_reported=NeMo Framework NVIDIA Release 25.04",
    }
    return Case(
        schema_name="training", id="T1", metric="step_time_s", value=1.0, quality="B", fields=base | fields
    )


def test_qwen_finetune_lora_trains_rank_64_on_every_linear() -> None:
    job, _ = memory_row(_memory_case())
    assert (job.lora_rank, job.lora_targets) == (64, "all")
    assert memory_options(_memory_case()).logits == "full"  # bf16 autocast, no DeepSpeed


def test_qwen_finetune_qlora_runs_deepspeed_zero2_in_fp16() -> None:
    options = memory_options(_memory_case(method="qlora", weight_dtype="int4"))
    assert options.logits == "half" and options.fp32_grad_copy
    assert options.bucket_bytes == zero_bucket_bytes(2e8)
    full = memory_options(_memory_case(method="full_ft"))
    assert full.fp32_grad_copy and full.bucket_bytes == 0.0  # ZeRO-3: no ZeRO-2 reduce buckets


def test_a_stated_rank_beats_the_script_default() -> None:
    job, _ = memory_row(_memory_case(lora_rank="8"))
    assert job.lora_rank == 8


def test_ms_swift_counts_reserved_memory_of_variable_lengths() -> None:
    swift = {"framework": "ms-swift", "notes": "dataset truncated to max_length"}
    options = memory_options(_memory_case(**swift))
    assert options.counting == "reserved" and options.variable_lengths
    job, _ = memory_row(_memory_case(**swift))
    assert (job.lora_rank, job.lora_targets) == (8, "attention")
    assert memory_options(_memory_case(method="full_ft", **swift)).pure_bf16


def test_nvidia_mlperf_rows_without_a_precision_train_in_fp8() -> None:
    assert training_dtype(_training_case()) == "fp8"
    assert training_dtype(_training_case(dtype="bf16")) == "bf16"
    other = _training_case(notes="MLPerf Training closed division | framework_reported=MI300X PyTorch")
    assert training_dtype(other) == ""
    assert fused_kernels(_training_case()) and not fused_kernels(
        _training_case(framework="torchtune", notes="")
    )


def test_breakdown_groups_rows_by_framework_class_and_method() -> None:
    cases = [
        _training_case(),
        Case(**{**_training_case().model_dump(), "id": "T2"}),
        _training_case(framework="megatron-bridge", model="Qwen/Qwen3-30B-A3B", method="pretrain").model_copy(
            update={"id": "T3"}
        ),
    ]

    def row(rid: str, ape: float | None) -> RowResult:
        return RowResult(
            id=rid,
            metric="step_time_s",
            quality="B",
            gpu="B200",
            measured=1.0,
            predicted=1.0,
            ape=ape,
            skip_reason=None,
        )

    groups = breakdown(
        cases,
        [row("T1", 0.1), row("T2", 0.3), row("T3", 0.2), row("T9", 0.5)],
        parse_by("framework,class,method"),
    )
    assert [(g.key, g.stats.n) for g in groups] == [
        ({"framework": "nemo", "class": "dense", "method": "lora"}, 2),
        ({"framework": "megatron-bridge", "class": "moe", "method": "pretrain"}, 1),
    ]
    assert groups[0].stats.mape == pytest.approx(0.2)


def test_an_unknown_by_key_names_the_flag() -> None:
    with pytest.raises(UserInputError, match=r"--by .*vendor.*is not one of framework, class"):
        parse_by("framework,vendor")

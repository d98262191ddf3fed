"""The host (kernel-launch) floor of a step, the interleaved bubble when micro-batches are too few, and
where a family without its own MFU factor reads one."""

from __future__ import annotations

import math

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.training import BALANCE_EXPONENT
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import (
    FUSED_LAUNCH_SHARE,
    HOST_PASSES,
    machine_balance,
    pipeline_bubble_fraction,
    predict_step,
)
from gpuplan.data.bundled_calibration import default_training_calibration

CAL = default_training_calibration()
A100 = default_catalog().get_gpu("A100-80GB-SXM")
SMALL = get_model("Qwen/Qwen-1_8B")
HOST_S = 5e-3
"""A host cost per layer pass far above the GPU's work on a 256-token micro-batch of a 1.8B model."""


def _step(job: TrainingJob, layout: TrainingLayout, host_s: float) -> float:
    cal = CAL.model_copy(update={"host_overhead_s": host_s})
    return predict_step(SMALL, A100, job, layout, cal).step_time_s


def test_a_launch_bound_step_takes_the_host_time() -> None:
    job = TrainingJob(method="lora", seq_len=256, global_batch=8)
    layout = TrainingLayout(checkpointing="full")
    host = 8 * SMALL.num_layers * HOST_PASSES["full"] * HOST_S
    cal = CAL.model_copy(update={"host_overhead_s": HOST_S})
    step = predict_step(SMALL, A100, job, layout, cal)
    gpu_work = step.compute_s + step.dequant_s
    assert host > gpu_work  # the premise: the host is the floor
    assert step.compute_s + step.host_s == pytest.approx(host, rel=1e-9)
    assert step.step_time_s == pytest.approx(sum(s for _, s in step.breakdown()), rel=1e-12)


def test_the_host_costs_nothing_while_the_gpu_is_busier() -> None:
    job = TrainingJob(method="full_ft", seq_len=8192, global_batch=8)
    layout = TrainingLayout(micro_batch=8)
    step = predict_step(SMALL, A100, job, layout, CAL.model_copy(update={"host_overhead_s": 1e-4}))
    assert step.host_s == 0.0
    assert step.step_time_s == pytest.approx(_step(job, layout, 0.0))


def test_fused_kernels_issue_a_fifth_of_the_launches() -> None:
    job = TrainingJob(method="lora", seq_len=256, global_batch=8)
    fused = job.model_copy(update={"kernel_launch": "fused"})
    layout = TrainingLayout()
    host = 8 * SMALL.num_layers * HOST_PASSES["none"] * HOST_S
    cal = CAL.model_copy(update={"host_overhead_s": HOST_S})
    eager_step = predict_step(SMALL, A100, job, layout, cal)
    fused_step = predict_step(SMALL, A100, fused, layout, cal)
    assert eager_step.compute_s + eager_step.host_s == pytest.approx(host)
    assert fused_step.compute_s + fused_step.host_s == pytest.approx(
        max(FUSED_LAUNCH_SHARE * host, fused_step.compute_s)
    )


def test_interleaving_needs_as_many_micro_batches_as_stages() -> None:
    # p = 8, m = 4 < p: the chunks of each micro-batch cross the ranks in turn, plain 1F1B bubble
    assert pipeline_bubble_fraction(pp=8, micro_batches=4, virtual_stages=4) == pytest.approx(7 / 11)
    assert pipeline_bubble_fraction(pp=8, micro_batches=8, virtual_stages=4) == pytest.approx(7 / 39)


def test_a_family_without_its_factor_reads_the_nearest_one() -> None:
    ampere_bf16 = CAL.mfu["ampere:bf16"]
    missing_int4 = CAL.model_copy(update={"mfu": {k: v for k, v in CAL.mfu.items() if k != "ampere:int4"}})
    assert missing_int4.mfu_for("ampere", "int4") == ampere_bf16  # QLoRA runs the same bf16 GEMMs
    assert CAL.mfu_for("ada", "bf16") == CAL.mfu["default:bf16"]  # no balance given: nothing to carry by


def test_an_uncalibrated_family_is_carried_over_by_machine_balance() -> None:
    balances = CAL.balance_flop_per_byte
    carried = [k for k in CAL.mfu if k.endswith(":bf16") and k in balances]
    assert {"ampere:bf16", "hopper:bf16"} <= set(carried)
    new = 250.0  # FLOP per byte, between the A100's and the H100's
    expected = math.exp(
        sum(math.log(CAL.mfu[k]) + BALANCE_EXPONENT * math.log(balances[k] / new) for k in carried)
        / len(carried)
    )
    assert CAL.mfu_for("ada", "bf16", balance=new) == pytest.approx(expected)
    # a GPU with the calibrated family's own balance reads that family's factor
    one = CAL.model_copy(
        update={"mfu": {"default": 0.4, "ampere:bf16": 0.7}, "balance_flop_per_byte": {"ampere:bf16": 150.0}}
    )
    assert one.mfu_for("ada", "bf16", balance=150.0) == pytest.approx(0.7)
    assert one.mfu_for("ada", "bf16", balance=600.0) == pytest.approx(0.35)  # 4x the balance: half
    h100 = default_catalog().get_gpu("H100-SXM")
    assert machine_balance(h100, "bf16") == pytest.approx(
        h100.sixteen_bit_tflops * 1e12 / h100.memory_bandwidth_bytes_per_s
    )

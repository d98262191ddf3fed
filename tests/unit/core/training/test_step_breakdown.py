"""The step-time breakdown adds up, MFU credits each method the FLOPs it needs (LoRA 4N, not 6N), HFU counts
what is executed, and the inter-node bandwidth reaches the exposed communication of multi-node plans only."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.model.arith import param_counts
from gpuplan.core.training.flops import model_flops_per_token
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import mfu_key, predict_step
from gpuplan.data.bundled_calibration import default_training_calibration

CAL = default_training_calibration()
GPU = default_catalog().get_gpu("H100-SXM")
LLAMA_8B = get_model("meta-llama/Llama-3.1-8B")


def test_lora_model_flops_are_four_n_and_full_updates_six_n() -> None:
    counts = param_counts(LLAMA_8B)
    n = counts.total - counts.embedding
    assert model_flops_per_token(LLAMA_8B, 1, method="lora") == pytest.approx(4 * n, rel=1e-3)
    assert model_flops_per_token(LLAMA_8B, 1, method="qlora") == pytest.approx(4 * n, rel=1e-3)
    assert model_flops_per_token(LLAMA_8B, 1, method="full_ft") == pytest.approx(6 * n, rel=1e-3)


@pytest.mark.parametrize(
    ("method", "checkpointing", "hfu_over_mfu"),
    [
        ("lora", "none", 1.0),  # executes exactly the 4N it is credited with
        ("full_ft", "none", 1.0),  # 6N both ways
        ("full_ft", "full", 8 / 6),  # recomputing the forward executes 8N, credited 6N
        ("lora", "full", 6 / 4),  # LoRA with recompute: 6N executed, 4N credited
    ],
)
def test_hfu_over_mfu_is_executed_over_credited_flops(
    method: str, checkpointing: str, hfu_over_mfu: float
) -> None:
    # seq_len 16: attention is under 0.1 % of the FLOPs, so the ratio is the GEMM passes'.
    job = TrainingJob.model_validate({"method": method, "seq_len": 16, "global_batch": 8})
    layout = TrainingLayout.model_validate({"micro_batch": 8, "checkpointing": checkpointing})
    step = predict_step(LLAMA_8B, GPU, job, layout, CAL)
    assert step.hfu / step.mfu == pytest.approx(hfu_over_mfu, rel=2e-3)
    assert 0 < step.mfu < 1 and 0 < step.hfu < 1.5


def test_the_breakdown_adds_up_to_the_step() -> None:
    model = get_model("meta-llama/Llama-3.1-70B")
    job = TrainingJob(method="pretrain", seq_len=4096, global_batch=64)
    layout = TrainingLayout(tp=8, pp=4, dp=2, zero_stage=1, micro_batch=1)
    step = predict_step(model, GPU, job, layout, CAL)
    parts = dict(step.breakdown())
    assert sum(parts.values()) == pytest.approx(step.step_time_s, rel=1e-12)
    assert parts["pipeline bubble"] > 0 and parts["exposed comm, TP/CP/EP/PP"] > 0
    assert parts["compute"] == step.compute_s


def _exposed_comm_s(layout: TrainingLayout, gbps: float) -> float:
    cal = CAL.model_copy(update={"ib_bytes_per_s_per_gpu": gbps * 1e9 / 8})
    job = TrainingJob(method="pretrain", seq_len=4096, global_batch=layout.dp * layout.micro_batch * 4)
    step = predict_step(LLAMA_8B, GPU, job, layout, cal)
    return step.dp_comm_exposed_s + step.mp_comm_exposed_s


def test_lower_inter_node_bandwidth_raises_exposed_communication_across_nodes_only() -> None:
    two_nodes = TrainingLayout(
        tp=2, pp=2, dp=4, zero_stage=1, micro_batch=1
    )  # 16 H100: PP and DP cross nodes
    assert _exposed_comm_s(two_nodes, 50) > _exposed_comm_s(two_nodes, 400) > 0
    one_node = TrainingLayout(tp=2, pp=2, dp=2, zero_stage=1, micro_batch=1)  # 8 H100: all NVLink
    assert _exposed_comm_s(one_node, 50) == _exposed_comm_s(one_node, 400)


def test_mfu_key_names_the_factor_the_step_reads() -> None:
    assert mfu_key(gpu=GPU, job=TrainingJob(seq_len=16, global_batch=1)) == "hopper:bf16"
    assert mfu_key(gpu=GPU, job=TrainingJob(seq_len=16, global_batch=1, dtype="fp16")) == "hopper:bf16"
    assert mfu_key(gpu=GPU, job=TrainingJob(seq_len=16, global_batch=1, dtype="fp8")) == "hopper:fp8"
    assert mfu_key(gpu=GPU, job=TrainingJob(seq_len=16, global_batch=1, method="qlora")) == "hopper:int4"

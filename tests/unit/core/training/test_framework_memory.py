"""Framework mechanisms of training memory, checked from first principles: DeepSpeed's fp32 gradient copy
and reduce buckets, 16-bit losses without autocast, fused-QKV LoRA adapters, and the allocator reserve
that variable-length steps strand."""

from __future__ import annotations

import pytest

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.model.arith import param_counts
from gpuplan.core.training.activations import logits_bytes
from gpuplan.core.training.memory import (
    FRAGMENTATION,
    MemoryOptions,
    training_memory,
    zero_bucket_bytes,
)
from gpuplan.core.training.params import lora_params, widths
from gpuplan.core.training.spec import TrainingJob, TrainingLayout

LLAMA_8B = "meta-llama/Llama-3.1-8B"
QWEN_7B = "Qwen/Qwen-7B-Chat"


def test_deepspeed_zero2_on_one_gpu_holds_twenty_bytes_per_param() -> None:
    """DeepSpeed's estimator: ZeRO-2 holds 4·N + 16·N/d bytes of model states (d = 1 here)."""
    model = get_model(LLAMA_8B)
    n = param_counts(model).total
    job = TrainingJob(method="full_ft", seq_len=512, global_batch=1)
    ds = training_memory(model, job, TrainingLayout(zero_stage=2), options=MemoryOptions(fp32_grad_copy=True))
    states = ds.weights_bytes + ds.gradients_bytes + ds.optimizer_bytes
    assert states / n == pytest.approx(20.0, rel=1e-6)


def test_the_fp32_gradient_copy_is_sharded_like_the_optimizer() -> None:
    model = get_model(LLAMA_8B)
    n = param_counts(model).total
    job = TrainingJob(method="full_ft", seq_len=512, global_batch=8)
    layout = TrainingLayout(dp=8, zero_stage=1)
    plain = training_memory(model, job, layout)
    ds = training_memory(model, job, layout, options=MemoryOptions(fp32_grad_copy=True))
    assert (ds.optimizer_bytes - plain.optimizer_bytes) / n == pytest.approx(4.0 / 8, rel=1e-6)


def test_adapters_get_an_fp32_gradient_copy_of_their_own_size() -> None:
    model = get_model(LLAMA_8B)
    job = TrainingJob(method="qlora", seq_len=512, global_batch=1, lora_rank=64)
    adapters = lora_params(model, rank=64, targets="all")
    plain = training_memory(model, job, TrainingLayout())
    ds = training_memory(model, job, TrainingLayout(), options=MemoryOptions(fp32_grad_copy=True))
    assert ds.optimizer_bytes - plain.optimizer_bytes == pytest.approx(4.0 * adapters)


def test_zero_buckets_are_two_sixteen_bit_buffers_with_overlap() -> None:
    assert zero_bucket_bytes(2e8) == 2 * 2e8 * 2
    assert zero_bucket_bytes(2e8, overlap_comm=False) == 2e8 * 2
    model = get_model(LLAMA_8B)
    job = TrainingJob(method="lora", seq_len=512, global_batch=1)
    active = MemoryOptions(counting="active")
    without = training_memory(model, job, TrainingLayout(), options=active)
    with_buckets = training_memory(
        model, job, TrainingLayout(), options=active.model_copy(update={"bucket_bytes": 8e8})
    )
    assert with_buckets.total_bytes - without.total_bytes == pytest.approx(8e8)


def test_a_loss_without_autocast_keeps_six_bytes_per_logit() -> None:
    model = get_model(QWEN_7B)
    job = TrainingJob(method="qlora", seq_len=2048, global_batch=1)
    layout = TrainingLayout(micro_batch=2)
    elements = 2 * 2048 * model.vocab_size
    assert logits_bytes(model, job, layout, "half") == pytest.approx(6.0 * elements)
    assert logits_bytes(model, job, layout, "full") == pytest.approx(12.0 * elements)


def test_fused_qkv_shares_one_adapter() -> None:
    """Qwen-1's c_attn is one h → 3h linear: one adapter of r·(h + q + 2kv), not three of r·(h + out)."""
    qwen = get_model(QWEN_7B)
    h, (q, kv) = qwen.hidden_size, widths(qwen)
    separate = qwen.model_copy(update={"model_type": "llama"})
    saved = lora_params(separate, rank=8, targets="attention") - lora_params(
        qwen, rank=8, targets="attention"
    )
    assert saved == 8 * 2 * h * qwen.num_layers
    assert (
        lora_params(qwen, rank=8, targets="attention") == 8 * ((h + q + 2 * kv) + (q + h)) * qwen.num_layers
    )


def test_variable_lengths_strand_one_more_transient_in_the_reserve() -> None:
    model = get_model(QWEN_7B)
    job = TrainingJob(method="lora", seq_len=2048, global_batch=1)
    layout = TrainingLayout(checkpointing="full")
    fixed = training_memory(model, job, layout, options=MemoryOptions(counting="reserved"))
    varied = training_memory(
        model, job, layout, options=MemoryOptions(counting="reserved", variable_lengths=True)
    )
    transient = varied.activations_bytes + varied.logits_bytes
    assert varied.total_bytes - fixed.total_bytes == pytest.approx(transient)
    assert varied.reserve_bytes == pytest.approx(fixed.reserve_bytes + transient)
    live = fixed.total_bytes - fixed.reserve_bytes
    assert fixed.reserve_bytes == pytest.approx(FRAGMENTATION * live)
    active = training_memory(
        model, job, layout, options=MemoryOptions(counting="active", variable_lengths=True)
    )
    assert active.reserve_bytes == 0 and active.overhead_bytes == 0

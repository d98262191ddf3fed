"""First-principles checks of the memory conventions: 8-bit / paged optimizers, optimizer-in-backward,
allocator counting, interleaved pipelines."""

from __future__ import annotations

import pytest

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.model.arith import param_counts
from gpuplan.core.training.activations import in_flight_stage_micro_batches
from gpuplan.core.training.memory import MemoryOptions, training_memory
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import pipeline_bubble_fraction

LLAMA_8B = "meta-llama/Llama-3.1-8B"


def test_eight_bit_adam_keeps_two_bytes_of_state_per_param() -> None:
    model = get_model(LLAMA_8B)
    n = param_counts(model).total
    job = TrainingJob(method="full_ft", seq_len=512, global_batch=1, optimizer="adamw_8bit")
    pure = training_memory(model, job, TrainingLayout(), options=MemoryOptions(pure_bf16=True))
    assert pure.optimizer_bytes / n == pytest.approx(2.0, rel=0.02)
    mixed = training_memory(model, job, TrainingLayout())
    assert mixed.optimizer_bytes / n == pytest.approx(6.0, rel=0.01)  # + fp32 master weights


def test_paged_states_are_invisible_to_allocator_counting() -> None:
    model = get_model(LLAMA_8B)
    job = TrainingJob(method="full_ft", seq_len=512, global_batch=1, optimizer="paged_adamw_8bit")
    device = training_memory(model, job, TrainingLayout(), options=MemoryOptions(counting="device"))
    active = training_memory(model, job, TrainingLayout(), options=MemoryOptions(counting="active"))
    assert device.optimizer_bytes > 0 and active.optimizer_bytes == 0
    assert active.overhead_bytes == 0


def test_optimizer_in_backward_drops_the_gradient_phase() -> None:
    model = get_model(LLAMA_8B)
    opts = MemoryOptions(pure_bf16=True, counting="active")
    layout = TrainingLayout(checkpointing="full")
    job = TrainingJob(method="full_ft", seq_len=512, global_batch=1)
    plain = training_memory(model, job, layout, options=opts)
    fused = training_memory(
        model, job.model_copy(update={"optimizer_in_backward": True}), layout, options=opts
    )
    # without fusion the full bf16 gradients (2 B/param) dominate the end of backward
    persistent = plain.weights_bytes + plain.optimizer_bytes
    assert plain.total_bytes == pytest.approx(persistent + plain.gradients_bytes)
    largest_grad = 2.0 * model.vocab_size * model.hidden_size
    transient = fused.activations_bytes + fused.logits_bytes
    assert fused.total_bytes == pytest.approx(persistent + transient + largest_grad)
    assert fused.total_bytes < plain.total_bytes


def test_interleaved_bubble_is_divided_by_virtual_stages() -> None:
    assert pipeline_bubble_fraction(pp=8, micro_batches=16) == pytest.approx(7 / 23)
    assert pipeline_bubble_fraction(pp=8, micro_batches=16, virtual_stages=4) == pytest.approx(7 / (64 + 7))


def test_interleaved_schedule_holds_more_micro_batches_in_flight() -> None:
    plain = TrainingLayout(pp=8)
    inter = TrainingLayout(pp=8, virtual_stages=2)
    assert in_flight_stage_micro_batches(plain, 32) == 8
    # 2(p-1) + (v-1)p + 1 = 23 chunk-micro-batches of L/(p·v) layers
    assert in_flight_stage_micro_batches(inter, 32) == pytest.approx(23 / 2)

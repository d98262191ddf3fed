"""First-principles checks of the training planner (memory, FLOPs, pipeline bubble, links, bad input)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import UserInputError
from gpuplan.core.model.arith import param_counts
from gpuplan.core.training.flops import executed_flops_per_token, model_flops_per_token
from gpuplan.core.training.memory import training_memory
from gpuplan.core.training.search import search_layouts
from gpuplan.core.training.spec import TrainingJob, TrainingLayout, check_layout, interleaved_chunks
from gpuplan.core.training.step import pipeline_bubble_fraction, predict_step
from gpuplan.data.bundled_calibration import default_training_calibration

LLAMA_8B = "meta-llama/Llama-3.1-8B"


def test_dense_training_flops_are_six_n_t_without_attention() -> None:
    model = get_model(LLAMA_8B)
    counts = param_counts(model)
    n = counts.total - counts.embedding  # the LM head counts, the embedding lookup does not
    seq = 1
    assert model_flops_per_token(model, seq) == pytest.approx(6 * n, rel=1e-3)
    full = executed_flops_per_token(model, seq, method="pretrain", checkpointing="full")
    assert full.gemm == pytest.approx(8 * n, rel=1e-3)


def test_model_flops_follow_palm_full_attention_convention() -> None:
    """6·N + 12·L·H·Q·T (PaLM App. B): the full attention matrix, twice the causal half executed."""
    model = get_model(LLAMA_8B)
    n = param_counts(model).total - param_counts(model).embedding
    seq = 8192
    attention = 12 * model.num_layers * model.hidden_size * seq
    assert model_flops_per_token(model, seq) == pytest.approx(6 * n + attention, rel=1e-3)
    executed = executed_flops_per_token(model, seq, method="pretrain", checkpointing="none")
    assert executed.attention == pytest.approx(attention / 2, rel=1e-3)


def test_zero3_model_states_are_16n_over_d() -> None:
    model = get_model(LLAMA_8B)
    n = param_counts(model).total
    job = TrainingJob(seq_len=1024, global_batch=8)
    for d in (1, 8, 64):
        layout = TrainingLayout(dp=d, zero_stage=3, micro_batch=1)
        mem = training_memory(model, job.model_copy(update={"global_batch": d}), layout)
        states = mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes
        assert states == pytest.approx(16 * n / d, rel=1e-9)


def test_lora_rank_zero_is_frozen_weights_plus_activations() -> None:
    model = get_model(LLAMA_8B)
    n = param_counts(model).total
    job = TrainingJob(method="lora", lora_rank=0, seq_len=2048, global_batch=1)
    mem = training_memory(model, job, TrainingLayout())
    assert mem.weights_bytes == pytest.approx(2 * n)
    assert mem.gradients_bytes == 0 and mem.optimizer_bytes == 0
    full = training_memory(model, job.model_copy(update={"method": "full_ft"}), TrainingLayout())
    assert mem.activations_bytes == pytest.approx(full.activations_bytes)
    assert mem.total_bytes < full.total_bytes


def test_qlora_base_is_about_a_quarter_of_bf16() -> None:
    model = get_model(LLAMA_8B)
    lora = training_memory(model, TrainingJob(method="lora", seq_len=512, global_batch=1), TrainingLayout())
    qlora = training_memory(model, TrainingJob(method="qlora", seq_len=512, global_batch=1), TrainingLayout())
    assert 0.25 < qlora.weights_bytes / lora.weights_bytes < 0.45


def test_pipeline_bubble_matches_closed_form() -> None:
    assert pipeline_bubble_fraction(pp=4, micro_batches=12) == pytest.approx(3 / 15)
    model = get_model(LLAMA_8B)
    gpu = default_catalog().get_gpu("H100-SXM")
    cal = default_training_calibration()
    job = TrainingJob(seq_len=2048, global_batch=12)
    step = predict_step(model, gpu, job, TrainingLayout(pp=4, micro_batch=1), cal)
    assert step.bubble_s / (step.compute_s + step.bubble_s) == pytest.approx(3 / 15)


def test_dp_scaling_falls_when_nvlink_becomes_pcie() -> None:
    catalog = default_catalog()
    gpu = catalog.get_gpu("A100-80GB-SXM")
    pcie = gpu.model_copy(update={"interconnect": gpu.interconnect.model_copy(update={"scale_up": "pcie"})})
    model = get_model(LLAMA_8B)
    cal = default_training_calibration()
    job = TrainingJob(seq_len=2048, global_batch=8)
    one = predict_step(model, gpu, job.model_copy(update={"global_batch": 1}), TrainingLayout(), cal)
    layout = TrainingLayout(dp=8, zero_stage=3)
    eff_nvlink = predict_step(model, gpu, job, layout, cal).tokens_per_s_per_gpu / one.tokens_per_s_per_gpu
    eff_pcie = predict_step(model, pcie, job, layout, cal).tokens_per_s_per_gpu / one.tokens_per_s_per_gpu
    assert eff_pcie < eff_nvlink
    assert eff_nvlink > 0.85


@pytest.mark.parametrize(
    ("job", "layout", "message"),
    [
        (TrainingJob(seq_len=1024, global_batch=10), TrainingLayout(dp=4), "not divisible"),
        (
            TrainingJob(seq_len=1024, global_batch=8),
            TrainingLayout(tp=3, dp=8),
            "does not divide the 32 attention",
        ),
        (TrainingJob(seq_len=10**6, global_batch=1), TrainingLayout(), "longer than"),
    ],
)
def test_bad_layouts_get_one_line_errors(job: TrainingJob, layout: TrainingLayout, message: str) -> None:
    with pytest.raises(UserInputError, match=message) as info:
        check_layout(get_model(LLAMA_8B), job, layout)
    assert "\n" not in info.value.one_line()


def test_ep_must_divide_experts() -> None:
    model = get_model("mistralai/Mixtral-8x7B-v0.1")
    with pytest.raises(UserInputError, match="does not divide the 8 experts"):
        check_layout(model, TrainingJob(seq_len=1024, global_batch=6), TrainingLayout(dp=6, ep=3))


def test_long_sequence_allowed_with_flag() -> None:
    job = TrainingJob(seq_len=10**6, global_batch=1, allow_long_seq=True)
    check_layout(get_model(LLAMA_8B), job, TrainingLayout())


@pytest.mark.parametrize(
    ("model_id", "pp", "chunks"),
    [
        ("meta-llama/Llama-3.1-405B", 1, 1),  # no pipeline: plain schedule
        ("meta-llama/Llama-3.1-405B", 16, 4),  # 126 layers / 16 ranks / 2 per chunk = 3.9
        ("meta-llama/Llama-3.1-405B", 8, 8),  # NeMo's 405B recipe: PP8, VP8
        ("meta-llama/Meta-Llama-3-70B", 4, 10),
    ],
)
def test_interleaved_chunks_hold_about_two_layers(model_id: str, pp: int, chunks: int) -> None:
    assert interleaved_chunks(get_model(model_id), pp) == chunks


def test_search_interleaves_when_the_bubble_dominates() -> None:
    """16 micro-batches on 16 stages idle (p−1)/(m+p−1) ≈ 48 % under plain 1F1B; interleaving wins."""
    model = get_model("meta-llama/Llama-3.1-70B")
    gpu = default_catalog().get_gpu("H100-SXM")
    job = TrainingJob(seq_len=4096, global_batch=16)
    found = search_layouts(model, gpu, job, 64, default_training_calibration())
    pipelined = [
        c for c in found.candidates if c.layout.pp == 16 and c.layout.tp == 4 and c.layout.micro_batch == 1
    ]
    by_schedule = {c.layout.virtual_stages: c.step for c in pipelined if c.layout.checkpointing == "full"}
    assert set(by_schedule) == {1, 2}
    assert by_schedule[2].bubble_s == pytest.approx(by_schedule[1].bubble_s / 2)
    assert by_schedule[2].step_time_s < by_schedule[1].step_time_s

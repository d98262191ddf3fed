"""Step time of one replica: the overlap loss between weight streaming and GEMM math, and mixed steps."""

from __future__ import annotations

import pytest

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.roofline import StepModel
from gpuplan.data.bundled_calibration import default_calibration

LLAMA_8B_PARAMS = 8_030_261_248
LLAMA_8B_INPUT_EMBEDDING = 128_256 * 4096


def _step(model: ModelSpec, gpu: GpuSpec, kappa: float) -> StepModel:
    cal = default_calibration().model_copy(update={"overlap_loss": kappa})
    return StepModel.build(model, gpu, Layout(), cal)


LLAMA_8B_LM_HEAD = 128_256 * 4096  # untied: as large as the input embedding


def _gemm_terms_s(step: StepModel, tokens: int, *, prompts: int = 0) -> tuple[float, float]:
    """(weight streaming, GEMM math) seconds of a step of ``tokens`` tokens, by hand: decode tokens
    (``prompts`` = 0) each run the LM head; a prefill of ``prompts`` prompts runs it once per prompt."""
    stream_s = step.dense_weight_bytes / step.bytes_per_s
    body = LLAMA_8B_PARAMS - LLAMA_8B_INPUT_EMBEDDING - LLAMA_8B_LM_HEAD
    flops = 2 * body * tokens + 2 * LLAMA_8B_LM_HEAD * (prompts if prompts else tokens)
    return stream_s, flops / step.gemm_flops_per_s


@pytest.mark.parametrize("tokens", [64, 512, 4096])
def test_overlap_loss_adds_kappa_times_the_shorter_term(
    llama8b: ModelSpec, h100: GpuSpec, tokens: int
) -> None:
    # A prefill step has no KV reads, so t(κ) − t(0) isolates the GEMM term: κ · min(t_W, t_F).
    pure = _step(llama8b, h100, 0.0).prefill_s(tokens=tokens, prompt_tokens=tokens)
    stream_s, math_s = _gemm_terms_s(_step(llama8b, h100, 0.0), tokens, prompts=1)
    for kappa in (0.25, 1.0):
        lossy = _step(llama8b, h100, kappa).prefill_s(tokens=tokens, prompt_tokens=tokens)
        assert lossy - pure == pytest.approx(kappa * min(stream_s, math_s), rel=1e-9)


def test_overlap_loss_matters_most_at_the_ridge(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # The relative cost of κ = 1 peaks where streaming and math take equally long (the ridge batch)
    # and fades at batch 1 (memory-bound) and at very large batches (compute-bound).
    pure, lossy = _step(llama8b, h100, 0.0), _step(llama8b, h100, 1.0)
    stream_s, math_per_token_s = _gemm_terms_s(pure, 1)
    ridge = round(stream_s / math_per_token_s)

    def penalty(batch: int) -> float:
        return lossy.decode_s(batch=batch, context=1) / pure.decode_s(batch=batch, context=1) - 1

    assert penalty(ridge) > 3 * penalty(1)
    assert penalty(ridge) > 3 * penalty(64 * ridge)


def test_decode_and_prefill_are_the_two_ends_of_a_step(llama8b: ModelSpec, h100: GpuSpec) -> None:
    step = _step(llama8b, h100, 0.68)
    assert step.step_s(batch=32, context=900, prefill_tokens=0, prompt_tokens=0) == step.decode_s(
        batch=32, context=900
    )
    assert step.step_s(batch=0, context=0, prefill_tokens=2048, prompt_tokens=1024) == step.prefill_s(
        tokens=2048, prompt_tokens=1024
    )


@pytest.mark.parametrize("kappa", [0.0, 0.68, 1.0])
def test_mixed_step_reads_the_weights_once(llama8b: ModelSpec, h100: GpuSpec, kappa: float) -> None:
    # Chunked prefill: 64 decodes and a 512-token chunk share one pass over the weights, so the step
    # is shorter than a decode step plus a prefill step, but longer than either alone.
    step = _step(llama8b, h100, kappa)
    decode = step.decode_s(batch=64, context=1500)
    prefill = step.prefill_s(tokens=512, prompt_tokens=1024)
    mixed = step.step_s(batch=64, context=1500, prefill_tokens=512, prompt_tokens=1024)
    assert max(decode, prefill) < mixed < decode + prefill


def test_mixed_step_saves_one_weight_stream_and_one_overhead(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # With κ = 1 the GEMM term is t_W + t_F, so two separate steps pay t_W and the step overhead twice.
    # Contexts and prompts of one token make attention negligible (no KV, no prompt attention).
    step = _step(llama8b, h100, 1.0)
    decode = step.decode_s(batch=64, context=1)
    prefill = step.prefill_s(tokens=512, prompt_tokens=1)
    mixed = step.step_s(batch=64, context=1, prefill_tokens=512, prompt_tokens=1)
    stream_s, _ = _gemm_terms_s(step, 1)
    assert decode + prefill - mixed == pytest.approx(stream_s + step.overhead_s, rel=1e-2)


def test_routed_flops_of_mixtral_by_hand() -> None:
    # Mixtral-8x7B: 32 MoE layers, top-2 of 8 experts, each expert 3 x 4096 x 14336 weights.
    mixtral = get_model("mistralai/Mixtral-8x7B-v0.1")
    assert arith.routed_flops_per_token(mixtral) == 2 * 32 * 2 * 3 * 4096 * 14336
    assert arith.routed_flops_per_token(get_model("meta-llama/Llama-3.1-8B")) == 0.0


def test_expert_efficiency_slows_only_the_routed_part(h100: GpuSpec) -> None:
    mixtral = get_model("mistralai/Mixtral-8x7B-v0.1")
    dense = get_model("meta-llama/Llama-3.1-8B")
    base = default_calibration().model_copy(update={"expert_efficiency": 1.0})
    slow = base.model_copy(update={"expert_efficiency": 0.5})
    layout = Layout(tp=2)
    for tokens in (1, 64, 4096):
        fast_s = StepModel.build(mixtral, h100, layout, base).prefill_s(tokens=tokens, prompt_tokens=tokens)
        slow_s = StepModel.build(mixtral, h100, layout, slow).prefill_s(tokens=tokens, prompt_tokens=tokens)
        assert slow_s > fast_s
        # Halving the experts' efficiency at most doubles the step (dense attention, norms, comm unchanged).
        assert slow_s < 2 * fast_s
    same = [StepModel.build(dense, h100, Layout(), c).decode_s(batch=32, context=1000) for c in (base, slow)]
    assert same[0] == same[1]


# --- power-capped boards ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu_id", "expected"),
    [
        ("H100-NVL", (400 / 700) / (835.5 / 989.5)),  # 0.677: 400 W board, 84 % of the SXM's peak
        ("H100-PCIe", (350 / 700) / (756.5 / 989.5)),  # 0.654
        ("A100-80GB-PCIe", 300 / 400),  # same 312 TFLOPS as the 400 W SXM
        ("A100-40GB-PCIe", 250 / 400),
        ("H200-NVL", 1.0),  # 600 W for 84 % of the peak: above the SXM's FLOP per watt, not capped
        ("H100-SXM", 1.0),  # the reference itself
        ("L40S", 1.0),  # no same-die reference in the catalog
    ],
)
def test_power_limited_fraction_by_hand(gpu_id: str, expected: float) -> None:
    from gpuplan.adapters.catalog.loader import default_catalog
    from gpuplan.core.perf.peaks import power_limited_fraction

    assert power_limited_fraction(default_catalog().get_gpu(gpu_id)) == pytest.approx(expected, rel=1e-9)


def test_power_cap_slows_gemm_math_but_not_weight_streaming(llama8b: ModelSpec) -> None:
    from gpuplan.adapters.catalog.loader import default_catalog
    from gpuplan.core.perf.peaks import power_limited_fraction

    nvl = default_catalog().get_gpu("H100-NVL")
    cal = default_calibration()
    capped = StepModel.build(llama8b, nvl, Layout(), cal.model_copy(update={"power_limit_exponent": 1.0}))
    free = StepModel.build(llama8b, nvl, Layout(), cal.model_copy(update={"power_limit_exponent": 0.0}))
    ratio = power_limited_fraction(nvl)
    assert capped.gemm_flops_per_s == pytest.approx(free.gemm_flops_per_s * ratio, rel=1e-12)
    assert capped.attn_flops_per_s == pytest.approx(free.attn_flops_per_s * ratio, rel=1e-12)
    assert capped.bytes_per_s == free.bytes_per_s
    # A batch-1 decode step streams weights: the cap leaves it (almost) unchanged; a long prefill is math.
    decode = capped.decode_s(batch=1, context=512) / free.decode_s(batch=1, context=512)
    prefill = capped.prefill_s(tokens=8192, prompt_tokens=8192) / free.prefill_s(
        tokens=8192, prompt_tokens=8192
    )
    assert decode < 1.02
    assert prefill > 1 / ratio * 0.9


def test_a_prompt_runs_the_lm_head_once(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # Engines compute logits only where they sample: a 4,096-token prompt pays the 1.05 GFLOP LM head
    # once, a batch of 4,096 decodes 4,096 times; the rest of the matmuls cost the same per token.
    step = _step(llama8b, h100, 0.0)
    head = 2 * LLAMA_8B_LM_HEAD
    assert step.lm_head_flops_per_token == head
    assert step._prefill_gemm_flops(4096, 4096) == pytest.approx(
        4096 * (step.matmul_flops_per_token - head) + head
    )
    assert step._prefill_gemm_flops(4096, 1024) == pytest.approx(
        4096 * (step.matmul_flops_per_token - head) + 4 * head
    )
    encoder = get_model("google-bert/bert-large-uncased")
    assert arith.lm_head_flops_per_token(encoder) == 0.0

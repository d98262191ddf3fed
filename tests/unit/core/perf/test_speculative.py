"""Speculative decoding: τ by hand, the verify step's cost, gains at batch 1 and at a compute-bound
batch, the proposer's weights, the method defaults, and a Layout carrying it through JSON."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import predict_inference
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import inference_memory
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.perf.speculative import METHOD_DEFAULTS, Speculative, tokens_per_step
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

LLAMA_8B_LAYER_PARAMS = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336
"""q and o (4096 x 4096 each), k and v (4096 x 1024 each, 8 KV heads of 128), gate/up/down 4096 x 14336."""
LLAMA_8B_LM_HEAD_PARAMS = 128_256 * 4096
CONTEXT = 1500


def _step(model: ModelSpec, gpu: GpuSpec, spec: Speculative | None = None) -> StepModel:
    return StepModel.build(model, gpu, Layout(speculative=spec), default_calibration())


def test_tokens_per_step_by_hand() -> None:
    # (1 − 0.8⁴) / (1 − 0.8) = 0.5904 / 0.2 = 2.952 (Leviathan et al. 2023, eq. 1); k = 1 is 1 + α.
    assert tokens_per_step(acceptance_rate=0.8, draft_tokens=3) == pytest.approx(2.952, rel=1e-12)
    assert Speculative(method="ngram", draft_tokens=3, acceptance_rate=0.8).tokens_per_step == pytest.approx(
        2.952
    )
    assert tokens_per_step(acceptance_rate=0.85, draft_tokens=1) == pytest.approx(1.85)


def test_method_defaults_fill_what_is_left_out() -> None:
    eagle = Speculative.model_validate({"method": "eagle"})
    assert (eagle.draft_tokens, eagle.acceptance_rate) == (3, 0.74)
    mtp = Speculative.model_validate({"method": "mtp", "draft_tokens": None})
    assert (mtp.draft_tokens, mtp.acceptance_rate) == (METHOD_DEFAULTS["mtp"].draft_tokens, 0.85)
    assert Speculative.model_validate({"method": "ngram", "acceptance_rate": 0.5}).draft_tokens == 3
    assert all(d.source for d in METHOD_DEFAULTS.values())


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"method": "eagle", "acceptance_rate": 1.5}, "less than 1"),
        ({"method": "eagle", "acceptance_rate": 0.0}, "greater than 0"),
        ({"method": "ngram", "draft_tokens": 0}, "greater than or equal to 1"),
        ({"method": "draft"}, "needs draft_model"),
        ({"method": "medusa"}, "'draft', 'mtp', 'eagle' or 'ngram'"),
    ],
)
def test_bad_configurations_are_refused(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Speculative.model_validate(fields)


def test_draft_model_is_for_the_draft_method_only(llama8b: ModelSpec) -> None:
    with pytest.raises(ValidationError, match="draft_model is for method 'draft' only"):
        Speculative.model_validate({"method": "mtp", "draft_model": llama8b})


def test_a_layout_with_speculation_round_trips_through_json() -> None:
    draft = get_model("meta-llama/Llama-3.2-1B")
    for spec in (
        Speculative.model_validate({"method": "draft", "draft_model": draft, "draft_tokens": 5}),
        Speculative.model_validate({"method": "eagle"}),
    ):
        layout = Layout(tp=2, weight_dtype="fp8", speculative=spec)
        again = Layout.model_validate_json(layout.model_dump_json())
        assert again == layout
        assert again.speculative is not None and again.speculative.draft_tokens == spec.draft_tokens
    assert Layout.model_validate_json(Layout().model_dump_json()).speculative is None


def test_the_verify_pass_costs_a_plain_step_at_batch_one(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # Batch 1 is bound by weight streaming (16 GB at ~2.5 TB/s = 6 ms) against 4 tokens of GEMM math
    # (4 x 16 GFLOP at ~500 TFLOP/s = 0.13 ms): verifying 3 drafts costs < 3 % more than one token.
    plain = _step(llama8b, h100).decode_s(batch=1, context=CONTEXT)
    spec = Speculative(method="ngram", draft_tokens=3, acceptance_rate=0.8)
    verify = _step(llama8b, h100, spec).decode_s(batch=1, context=CONTEXT) * spec.tokens_per_step
    assert plain < verify < 1.03 * plain


def test_gain_at_batch_one_is_tau_over_one_plus_the_proposer_share(llama8b: ModelSpec, h100: GpuSpec) -> None:
    spec = Speculative(method="eagle", draft_tokens=3, acceptance_rate=0.8)
    base, fast = _step(llama8b, h100), _step(llama8b, h100, spec)
    proposer = fast.proposer
    assert proposer is not None
    # One EAGLE pass streams one decoder layer and the LM head in bf16, nothing else.
    assert proposer.dense_weight_bytes == (LLAMA_8B_LAYER_PARAMS + LLAMA_8B_LM_HEAD_PARAMS) * 2
    plain = base.decode_s(batch=1, context=CONTEXT)
    share = 3 * (proposer.decode_s(batch=1, context=CONTEXT) - proposer.overhead_s) / plain
    assert 0.2 < share < 0.4  # 3 passes of ~1.5 GB against ~16 GB plus the host overhead
    gain = plain / fast.decode_s(batch=1, context=CONTEXT)
    assert gain == pytest.approx(2.952 / (1 + share), rel=0.03)


def test_gain_falls_below_one_once_the_step_is_compute_bound(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # A verify pass multiplies the GEMM math by k + 1 = 4 while the weights stream once and each
    # sequence's KV is read once: memory-bound at batch 1 (gain ≈ τ = 2.952), below 1 once the math
    # dominates. With a one-token context the KV reads vanish and the gain tends to τ / (k + 1) = 0.738.
    spec = Speculative(method="ngram", draft_tokens=3, acceptance_rate=0.8)
    base, fast = _step(llama8b, h100), _step(llama8b, h100, spec)

    def gain(batch: int, context: int) -> float:
        return base.decode_s(batch=batch, context=context) / fast.decode_s(batch=batch, context=context)

    gains = [gain(b, 64) for b in (1, 64, 512, 4096)]
    assert gains == sorted(gains, reverse=True)
    assert gains[0] > 2.8
    assert gains[-1] < 0.9
    assert gain(16384, 1) == pytest.approx(2.952 / 4, rel=0.02)


def test_throughput_at_a_batch_is_batch_times_tau_over_the_step(llama8b: ModelSpec, h100: GpuSpec) -> None:
    spec = Speculative(method="ngram", draft_tokens=3, acceptance_rate=0.8)
    fast = _step(llama8b, h100, spec)
    w = Workload(scenario="static_batch", input_tokens=1000, output_tokens=1001, batch_size=32)
    pred = predict_inference(llama8b, h100, Layout(speculative=spec), w, cal=default_calibration())
    verify_s = fast.decode_s(batch=32, context=1500) * spec.tokens_per_step
    assert pred.tpot_s == pytest.approx(verify_s / 2.952, rel=1e-9)
    assert pred.bound == "memory"


def test_a_draft_model_adds_its_weights_and_kv(llama8b: ModelSpec, h100: GpuSpec) -> None:
    draft = get_model("meta-llama/Llama-3.2-1B")
    plain = inference_memory(llama8b, h100, Layout(), max_model_len=4096)
    with_draft = Layout(speculative=Speculative.model_validate({"method": "draft", "draft_model": draft}))
    spec_mem = inference_memory(llama8b, h100, with_draft, max_model_len=4096)
    draft_mem = inference_memory(draft, h100, Layout(), max_model_len=4096)
    assert spec_mem.weights_bytes == pytest.approx(plain.weights_bytes + draft_mem.weights_bytes)
    assert spec_mem.kv_bytes_per_token == pytest.approx(
        plain.kv_bytes_per_token + draft_mem.kv_bytes_per_token
    )
    assert spec_mem.kv_tokens < plain.kv_tokens


def test_an_mtp_layer_shares_the_head_and_ngram_costs_no_memory(llama8b: ModelSpec, h100: GpuSpec) -> None:
    plain = inference_memory(llama8b, h100, Layout(), max_model_len=4096)
    mtp = inference_memory(
        llama8b, h100, Layout(speculative=Speculative.model_validate({"method": "mtp"})), max_model_len=4096
    )
    assert mtp.weights_bytes - plain.weights_bytes == pytest.approx(LLAMA_8B_LAYER_PARAMS * 2)
    ngram = inference_memory(
        llama8b, h100, Layout(speculative=Speculative.model_validate({"method": "ngram"})), max_model_len=4096
    )
    assert ngram == plain

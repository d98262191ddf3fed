"""Prefix caching: the tokens a prefill computes, its step time by hand, TTFT and prefill load under a
rate, KV memory unchanged, and the simulator agreeing on one request."""

from __future__ import annotations

import pytest

from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel, predict_inference
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.prefix_cache import cached_prompt_tokens, computed_prompt_tokens
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

PROMPT = 4096
"""One chunk on an H100 (vLLM V1 batches 8,192 tokens on GPUs of >= 70 GiB): one prefill step."""


def _single(h: float) -> Workload:
    return Workload(scenario="single", input_tokens=PROMPT, output_tokens=64, prefix_cache_hit_rate=h)


def test_the_uncached_share_is_computed_and_at_least_one_token() -> None:
    assert computed_prompt_tokens(_single(0.5)) == 2048
    assert cached_prompt_tokens(_single(0.5)) == 2048
    assert computed_prompt_tokens(_single(0.0)) == PROMPT
    tiny = Workload(scenario="single", input_tokens=10, output_tokens=1, prefix_cache_hit_rate=0.99)
    assert computed_prompt_tokens(tiny) == 1  # the last token is always computed


def test_a_cached_prefill_step_by_hand(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # 2,048 computed tokens of a 4,096-token prompt: their weight matmuls (LM head once) and their
    # attention over positions 2,049..4,096, which attends over the cached half too:
    # arith.prefill_flops(2,048 after 2,048 cached) − 2,048 · 2N.
    step = StepModel.build(llama8b, h100, Layout(), default_calibration())
    head, per_token = step.lm_head_flops_per_token, step.matmul_flops_per_token
    gemm = 2048 * (per_token - head) + head
    attention = arith.prefill_flops(llama8b, prompt_tokens=2048, cached_tokens=2048) - 2048 * per_token
    stream_s, math_s = step.dense_weight_bytes / step.bytes_per_s, gemm / step.gemm_flops_per_s
    expected = (
        max(stream_s, math_s)
        + step.overlap_loss * min(stream_s, math_s)
        + attention / step.attn_flops_per_s
        + step.overhead_s
        + step.prefill_launch_s
    )
    assert step.prefill_s(tokens=2048, prompt_tokens=PROMPT, cached_tokens=2048) == pytest.approx(
        expected, rel=1e-12
    )
    # The computed half attends more than half of the prompt's attention: 3/4 of it (positions 2,049..4,096).
    whole = arith.prefill_flops(llama8b, prompt_tokens=PROMPT) - PROMPT * per_token
    assert attention / whole == pytest.approx(0.75, rel=1e-3)


def test_ttft_drops_with_the_hit_rate_and_kv_does_not(llama8b: ModelSpec, h100: GpuSpec) -> None:
    cal = default_calibration()
    cold = predict_inference(llama8b, h100, Layout(), _single(0.0), cal=cal)
    warm = predict_inference(llama8b, h100, Layout(), _single(0.5), cal=cal)
    step = StepModel.build(llama8b, h100, Layout(), cal)
    assert cold.ttft_s == pytest.approx(step.prefill_s(tokens=PROMPT, prompt_tokens=PROMPT))
    assert warm.ttft_s == pytest.approx(step.prefill_s(tokens=2048, prompt_tokens=PROMPT, cached_tokens=2048))
    # About (1 − h) of the matmul-bound prefill, a little more for the attention over the cached half.
    assert 0.5 < warm.ttft_s / cold.ttft_s < 0.56
    assert warm.tpot_s == cold.tpot_s
    assert warm.memory == cold.memory  # KV is still counted for the whole prompt (conservative)


def test_a_rate_sees_less_prefill_load(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # The prefill share of the GPU, f = λ · t_prefill, drops, and with it TPOT = t_decode / (1 − f).
    cal = default_calibration()

    def at(rate_rps: float, h: float) -> tuple[float, float, float]:
        w = Workload(
            scenario="rate", input_tokens=8000, output_tokens=100, rate_rps=rate_rps, prefix_cache_hit_rate=h
        )
        pred = predict_inference(llama8b, h100, Layout(), w, cal=cal)
        return pred.ttft_s, pred.tpot_s, pred.output_tokens_per_s

    cold, warm = at(2.0, 0.0), at(2.0, 0.75)
    assert warm[0] < 0.5 * cold[0]
    assert warm[1] < 0.8 * cold[1]
    assert warm[2] == cold[2] == 200.0
    # 3 prompts of 8,000 tokens a second overload one H100 (no finite latency); their 2,000-token
    # uncached remainders do not.
    assert at(3.0, 0.0)[2] == 0.0
    assert at(3.0, 0.75)[2] == 300.0


def test_the_simulator_prefills_only_the_uncached_share(llama8b: ModelSpec, h100: GpuSpec) -> None:
    from gpuplan.core.sim.config import SimConfig

    replica = ReplicaModel.build(
        llama8b, h100, Layout(), context_tokens=PROMPT + 64, cal=default_calibration()
    )
    one = WorkloadSpec(
        arrival=ArrivalSpec(kind="closed_loop", concurrency=1),
        input_tokens=LengthDist(kind="fixed", value=PROMPT),
        output_tokens=LengthDist(kind="fixed", value=64),
        num_requests=3,
    )
    run = summarise(simulate(replica, generate(one), SimConfig(prefix_cache_hit_rate=0.5)))
    analytic = predict_inference(llama8b, h100, Layout(), _single(0.5), cal=default_calibration())
    assert run.ttft.mean_ms == pytest.approx(analytic.ttft_s * 1e3, rel=1e-9)

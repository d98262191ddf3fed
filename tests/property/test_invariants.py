"""Invariants the performance and cost models must keep for any input (hypothesis)."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.cost import cloud_usd_per_hour, usd_per_million_tokens
from gpuplan.core.dtypes import BF16, get_dtype
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import kv_bytes_per_token_per_gpu, weight_bytes_per_gpu
from gpuplan.core.perf.roofline import StepModel
from gpuplan.data.bundled_calibration import default_calibration

FAST = settings(max_examples=40, deadline=None)

MODEL_IDS = (
    "meta-llama/Llama-3.1-8B",  # GQA, 8 KV heads
    "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen3-8B",
    "tiiuae/falcon-7b",  # MQA: one KV head
    "mistralai/Mixtral-8x7B-v0.1",  # MoE
    "deepseek-ai/DeepSeek-V3",  # MLA + MoE
    "openai/gpt-oss-20b",  # sliding window + MXFP4 rules
    "google/gemma-2-9b",
)
GPU_IDS = ("T4", "L4", "A100-80GB-SXM", "H100-SXM", "H200-SXM", "B200", "MI300X")
DTYPES = ("bf16", "fp8", "int4", "fp4")


@cache
def _model(model_id: str) -> ModelSpec:
    return get_model(model_id)


@cache
def _gpu(gpu_id: str) -> GpuSpec:
    return default_catalog().get_gpu(gpu_id)


def _head_divisors(model: ModelSpec) -> list[int]:
    heads = model.num_attention_heads or 1
    return [d for d in range(1, min(heads, 128) + 1) if heads % d == 0]


def _per_gpu_bytes(model: ModelSpec, dtype: str, tp: int) -> float:
    """Weights plus one token of KV cache on one GPU."""
    return weight_bytes_per_gpu(
        model, weight_dtype=get_dtype(dtype), tp=tp
    ).total + kv_bytes_per_token_per_gpu(model, kv_dtype=BF16, tp=tp)


@FAST
@given(model_id=st.sampled_from(MODEL_IDS), dtype=st.sampled_from(DTYPES), data=st.data())
def test_memory_per_gpu_never_rises_with_tp(model_id: str, dtype: str, data: st.DataObject) -> None:
    model = _model(model_id)
    divisors = _head_divisors(model)
    lo = data.draw(st.sampled_from(divisors), label="tp_lo")
    hi = data.draw(st.sampled_from([d for d in divisors if d >= lo]), label="tp_hi")
    assert _per_gpu_bytes(model, dtype, hi) <= _per_gpu_bytes(model, dtype, lo)
    assert kv_bytes_per_token_per_gpu(model, kv_dtype=BF16, tp=hi) <= kv_bytes_per_token_per_gpu(
        model, kv_dtype=BF16, tp=lo
    )


@FAST
@given(
    model_id=st.sampled_from(MODEL_IDS),
    gpu_id=st.sampled_from(GPU_IDS),
    dtype=st.sampled_from(DTYPES),
    batch=st.integers(min_value=1, max_value=1024),
    context=st.integers(min_value=1, max_value=65_536),
    factor=st.floats(min_value=1.0, max_value=10.0),
)
def test_decode_never_slows_when_bandwidth_rises(
    model_id: str, gpu_id: str, dtype: str, batch: int, context: int, factor: float
) -> None:
    model, gpu = _model(model_id), _gpu(gpu_id)
    faster = gpu.model_copy(
        update={"memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s * factor}
    )
    layout = Layout(weight_dtype=dtype)
    cal = default_calibration()
    base = StepModel.build(model, gpu, layout, cal).decode_s(batch=batch, context=context)
    quick = StepModel.build(model, faster, layout, cal).decode_s(batch=batch, context=context)
    assert quick <= base * (1 + 1e-12)
    assert quick > 0


@FAST
@given(
    model_id=st.sampled_from(MODEL_IDS),
    gpu_id=st.sampled_from(GPU_IDS),
    p1=st.integers(min_value=1, max_value=32_768),
    p2=st.integers(min_value=1, max_value=32_768),
)
def test_prefill_time_non_decreasing_in_prompt(model_id: str, gpu_id: str, p1: int, p2: int) -> None:
    lo, hi = sorted((p1, p2))
    step = StepModel.build(_model(model_id), _gpu(gpu_id), Layout(), default_calibration())
    assert step.prefill_s(tokens=lo, prompt_tokens=lo) <= step.prefill_s(tokens=hi, prompt_tokens=hi) * (
        1 + 1e-12
    )


@FAST
@given(
    price=st.floats(min_value=0.01, max_value=200.0),
    n=st.integers(min_value=1, max_value=4096),
    m=st.integers(min_value=1, max_value=4096),
)
def test_cloud_cost_linear_in_gpus(price: float, n: int, m: int) -> None:
    one = cloud_usd_per_hour(usd_per_gpu_hour=price, gpus=1)
    assert one == price
    assert cloud_usd_per_hour(usd_per_gpu_hour=price, gpus=n) == pytest.approx(n * one, rel=1e-12)
    assert cloud_usd_per_hour(usd_per_gpu_hour=price, gpus=n + m) == pytest.approx(
        cloud_usd_per_hour(usd_per_gpu_hour=price, gpus=n)
        + cloud_usd_per_hour(usd_per_gpu_hour=price, gpus=m),
        rel=1e-12,
    )


@FAST
@given(
    usd=st.floats(min_value=0.01, max_value=1e4),
    t1=st.floats(min_value=1e-3, max_value=1e7),
    t2=st.floats(min_value=1e-3, max_value=1e7),
)
def test_usd_per_million_tokens_decreasing_in_throughput(usd: float, t1: float, t2: float) -> None:
    lo, hi = sorted((t1, t2))
    assume(hi > lo * (1 + 1e-9))
    assert usd_per_million_tokens(usd_per_hour=usd, tokens_per_s=hi) < usd_per_million_tokens(
        usd_per_hour=usd, tokens_per_s=lo
    )
    # And it is exactly the hourly price spread over the hour's tokens.
    assert usd_per_million_tokens(usd_per_hour=usd, tokens_per_s=lo) * lo * 3600 / 1e6 == pytest.approx(usd)

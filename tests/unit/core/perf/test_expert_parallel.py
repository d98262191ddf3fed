"""Wide expert parallelism: the MoE all-to-all by hand and against DeepEP's published table, expert load
imbalance, attention-DP memory and step terms, and the layout rules."""

from __future__ import annotations

import dataclasses

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import UserInputError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf import expert_parallel as xp
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.perf.memory import inference_memory, kv_bytes_per_token_per_gpu, weight_bytes_per_gpu
from gpuplan.core.perf.roofline import StepModel
from gpuplan.data.bundled_calibration import default_calibration

HIDDEN, TOP_K = 7168, 8  # DeepSeek-V3
NVLINK_BYTES_PER_S = 315e9  # any NVLink rate: across nodes the NIC is the longer leg


@pytest.fixture(scope="module")
def dsv3() -> ModelSpec:
    return get_model("deepseek-ai/DeepSeek-V3")


@pytest.fixture(scope="module")
def mixtral() -> ModelSpec:
    return get_model("mistralai/Mixtral-8x7B-v0.1")


@pytest.fixture(scope="module")
def h800() -> GpuSpec:
    return default_catalog().get_gpu("H800")


def _collective_s(ep: int, bytes_per_element: float, tokens: float = 128.0) -> float:
    return xp.alltoall_s(
        tokens_per_gpu=tokens,
        hidden=HIDDEN,
        top_k=TOP_K,
        bytes_per_element=bytes_per_element,
        ep=ep,
        node_gpus=8,
        intra_bytes_per_s=NVLINK_BYTES_PER_S,
        inter_bytes_per_s=50e9,
    )


def test_ep16_over_two_nodes_by_hand() -> None:
    # 128 tokens x top-8 copies x 7168 x (1 + 4/128) bytes = 7,569,408 B leave each GPU; half of the
    # 16 ranks are on the other node: 3,784,704 B over 50 GB/s = 75.694 µs, + 50 µs latency.
    assert _collective_s(16, xp.FP8_DISPATCH_BYTES_PER_ELEMENT) == pytest.approx(125.694e-6, rel=1e-4)
    # combine in bf16: 128 x 8 x 7168 x 2 = 14,680,064 B, half off-node: 146.80 µs + 50 µs
    assert _collective_s(16, xp.SIXTEEN_BIT_BYTES) == pytest.approx(196.801e-6, rel=1e-4)


def test_inside_one_node_only_nvlink_carries_the_tokens() -> None:
    sent = 128 * TOP_K * HIDDEN * 2.0
    assert _collective_s(8, 2.0) == pytest.approx(sent * 7 / 8 / NVLINK_BYTES_PER_S + xp.ALLTOALL_LATENCY_S)
    assert _collective_s(1, 2.0) == 0.0


@pytest.mark.parametrize(
    ("ep", "dispatch_us", "combine_us"),
    [(16, 118, 195), (32, 155, 273), (64, 173, 314), (128, 192, 369), (256, 194, 360)],
)
def test_close_to_deepeps_low_latency_table(ep: int, dispatch_us: float, combine_us: float) -> None:
    # DeepEP V1 low-latency kernels on H800 + one CX7 400 Gb/s per GPU, 128 tokens, hidden 7168, top-8,
    # FP8 dispatch, BF16 combine (docs/legacy.md of deepseek-ai/DeepEP, commit 0297fc8).
    assert _collective_s(ep, xp.FP8_DISPATCH_BYTES_PER_ELEMENT) == pytest.approx(dispatch_us * 1e-6, rel=0.1)
    assert _collective_s(ep, xp.SIXTEEN_BIT_BYTES) == pytest.approx(combine_us * 1e-6, rel=0.15)


def test_stage_terms_are_every_moe_layers_dispatch_and_combine(dsv3: ModelSpec, h800: GpuSpec) -> None:
    assert dsv3.moe is not None
    layers = dsv3.moe.num_moe_layers  # 58 of 61
    layout = Layout(tp=1, attention_dp=16, ep=16, weight_dtype="fp8")
    fixed_s, per_token_s = xp.alltoall_terms_s(dsv3, h800, layout, intra_bytes_per_s=NVLINK_BYTES_PER_S)
    assert fixed_s == pytest.approx(layers * 2 * xp.ALLTOALL_LATENCY_S)
    # 2,048 replica tokens are 128 per GPU; the busiest rank carries 1.2x the mean
    one_layer = (
        _collective_s(16, xp.FP8_DISPATCH_BYTES_PER_ELEMENT) + _collective_s(16, 2.0) - fixed_s / layers
    )
    assert fixed_s + 2048 * per_token_s == pytest.approx(
        fixed_s + layers * one_layer * xp.EXPERT_IMBALANCE, rel=1e-9
    )
    hidden_half = xp.alltoall_terms_s(
        dsv3, h800, layout, intra_bytes_per_s=NVLINK_BYTES_PER_S, hidden_share=0.5
    )
    assert hidden_half == pytest.approx((fixed_s / 2, per_token_s / 2))


@pytest.mark.parametrize(
    "layout",
    [Layout(tp=8, ep=8), Layout(tp=1, attention_dp=8, ep=1), Layout(tp=8)],
    ids=["ep-inside-tp", "experts-by-tp-over-dp", "tp-only"],
)
def test_no_alltoall_where_tokens_are_already_on_every_rank(
    dsv3: ModelSpec, h800: GpuSpec, layout: Layout
) -> None:
    assert xp.alltoall_terms_s(dsv3, h800, layout, intra_bytes_per_s=NVLINK_BYTES_PER_S) == (0.0, 0.0)


def test_step_pays_the_alltoall_per_decode_step(dsv3: ModelSpec, h800: GpuSpec) -> None:
    step = StepModel.build(
        dsv3, h800, Layout(tp=1, attention_dp=16, ep=16, weight_dtype="fp8"), default_calibration()
    )
    free = dataclasses.replace(step, alltoall_terms_s=(0.0, 0.0), _memo={})
    fixed_s, per_token_s = step.alltoall_terms_s
    batch = 2048.0
    extra = step.decode_s(batch=batch, context=4096) - free.decode_s(batch=batch, context=4096)
    assert extra == pytest.approx(fixed_s + batch * per_token_s, rel=1e-9)


def test_imbalance_scales_the_routed_math_of_the_busiest_rank(dsv3: ModelSpec, h800: GpuSpec) -> None:
    step = StepModel.build(dsv3, h800, Layout(tp=8, ep=8, weight_dtype="fp8"), default_calibration())
    assert step.expert_imbalance == xp.EXPERT_IMBALANCE
    balanced = dataclasses.replace(step, expert_imbalance=1.0, _memo={})
    tokens = 16_384.0  # a long prefill: GEMM math, not weight streaming, sets the GEMM term
    extra = step.prefill_s(tokens=tokens, prompt_tokens=tokens) - balanced.prefill_s(
        tokens=tokens, prompt_tokens=tokens
    )
    routed_s = tokens * step.routed_flops_per_token / 8 / step.gemm_flops_per_s / step.expert_efficiency
    assert extra == pytest.approx((xp.EXPERT_IMBALANCE - 1.0) * routed_s, rel=1e-9)
    assert xp.imbalance_factor(Layout(tp=8)) == 1.0


def test_attention_dp_ranks_hold_their_own_kv(mixtral: ModelSpec) -> None:
    h100 = default_catalog().get_gpu("H100-SXM")
    dp = Layout(tp=1, attention_dp=4, ep=4)
    weights = weight_bytes_per_gpu(mixtral, weight_dtype=dp.weight_dtype, tp=1, ep=4, attention_dp=4)
    tp1 = weight_bytes_per_gpu(mixtral, weight_dtype=dp.weight_dtype, tp=1)
    assert weights.dense_linear == tp1.dense_linear  # attention replicated on every DP rank
    assert weights.routed_experts == pytest.approx(tp1.routed_experts / 4)  # 2 of 8 experts per GPU
    mem = inference_memory(mixtral, h100, dp, max_model_len=8192)
    per_token = kv_bytes_per_token_per_gpu(mixtral, kv_dtype=dp.resolved_kv_dtype, tp=1)
    assert mem.kv_bytes_per_token == per_token  # a rank's KV is not split: full heads per token
    block = dp.engine.block_size_tokens
    assert mem.kv_tokens == 4 * int(mem.kv_pool_bytes // (per_token * block)) * block


def test_redundant_experts_fill_an_ep_that_leaves_a_remainder(dsv3: ModelSpec) -> None:
    # EP144 over 256 experts: two expert slots per GPU (256 + 32 redundant), not 256/144 = 1.78
    wide = weight_bytes_per_gpu(dsv3, weight_dtype=Layout().weight_dtype, tp=1, ep=144, attention_dp=144)
    tp1 = weight_bytes_per_gpu(dsv3, weight_dtype=Layout().weight_dtype, tp=1)
    assert wide.routed_experts == pytest.approx(tp1.routed_experts * 2 / 256)


def test_a_replica_is_tp_pp_dp_gpus() -> None:
    layout = Layout(tp=2, pp=1, attention_dp=8, ep=16, replicas=3)
    assert (layout.gpus_per_replica, layout.num_gpus) == (16, 48)
    assert layout.replica_label == "tp=2 pp=1 dp=8 ep=16, bf16"
    assert split_gpus(48, 2, 1, field="--count", attention_dp=8) == (2, 3)
    with pytest.raises(
        UserInputError, match=r"--count=40 is not a positive multiple of tp x pp x attention_dp"
    ):
        split_gpus(40, 2, 1, field="--count", attention_dp=8)


def test_wide_ep_across_nodes_is_a_valid_layout(dsv3: ModelSpec, h800: GpuSpec) -> None:
    for ranks in (16, 144):
        check_layout(dsv3, h800, Layout(tp=1, attention_dp=ranks, ep=ranks, weight_dtype="fp8"))


@pytest.mark.parametrize(
    ("model_id", "layout", "message"),
    [
        (
            "meta-llama/Llama-3.1-8B",
            Layout(tp=1, attention_dp=2),
            r"attention_dp=2 but meta-llama/Llama-3.1-8B is not a mixture-of-experts model",
        ),
        (
            "mistralai/Mixtral-8x7B-v0.1",
            Layout(tp=2, ep=4),
            r"ep=4 exceeds tp=2: experts spread beyond one TP group need attention data parallelism",
        ),
        (
            "mistralai/Mixtral-8x7B-v0.1",
            Layout(tp=1, attention_dp=16, ep=16),
            r"ep=16 exceeds .*'s 8 experts",
        ),
        (
            "deepseek-ai/DeepSeek-V3",
            Layout(tp=1, attention_dp=4, ep=2),
            r"attention_dp=4 with ep=2: the experts are split over all tp x attention_dp = 4 GPUs",
        ),
        (
            "deepseek-ai/DeepSeek-V3",
            Layout(tp=1, attention_dp=16),
            r"tp x attention_dp = 16 spans more than one H800 node \(8 GPUs\) with experts split by TP",
        ),
        (
            "deepseek-ai/DeepSeek-V3",
            Layout(tp=16, attention_dp=2, ep=32),
            r"tp=16 spans more than one H800 node",
        ),
    ],
)
def test_check_layout_names_the_broken_rule(
    model_id: str, layout: Layout, message: str, h800: GpuSpec
) -> None:
    with pytest.raises(UserInputError, match=message):
        check_layout(get_model(model_id), h800, layout)


def test_the_hint_gives_the_attention_dp_to_set(mixtral: ModelSpec, h800: GpuSpec) -> None:
    with pytest.raises(UserInputError) as info:
        check_layout(mixtral, h800, Layout(tp=2, ep=8))
    assert info.value.hint == "set attention_dp = ep / tp = 4 (ep = tp x attention_dp), or use ep <= tp"


def test_a_lone_prompt_runs_on_one_attention_dp_rank() -> None:
    """Under attention DP a prompt's attention and dense layers run on its own rank's GPUs only; its
    routed experts still spread over every EP rank. A lone 4,000-token DeepSeek-V3 prompt on tp1 x dp8
    therefore takes at least its dense and attention math on one H200, and longer than on TP8."""

    model, gpu, cal = (
        get_model("deepseek-ai/DeepSeek-V3"),
        default_catalog().get_gpu("H200-SXM"),
        default_calibration(),
    )
    wide = ReplicaModel.build(
        model, gpu, Layout(tp=1, ep=8, attention_dp=8, weight_dtype="fp8"), context_tokens=4500, cal=cal
    )
    tp8 = ReplicaModel.build(model, gpu, Layout(tp=8, ep=8, weight_dtype="fp8"), context_tokens=4500, cal=cal)
    step = wide.step
    dense_flops = arith.prefill_flops(model, prompt_tokens=4000) - 4000 * step.routed_flops_per_token
    one_gpu_s = dense_flops / max(step.gemm_flops_per_s, step.attn_flops_per_s)
    assert step.lone_prefill_s(4000) >= one_gpu_s
    assert step.lone_prefill_s(4000) > tp8.step.lone_prefill_s(4000)
    packed = step.prefill_s(tokens=8 * 4000, prompt_tokens=4000)  # eight prompts, one per rank
    assert packed < 8 * step.lone_prefill_s(4000)

"""MoE training: expert-parallel all-to-all bytes and time checked by hand, grouped-GEMM efficiency,
and dense models (no experts, or EP = 1) priced exactly as before the MoE terms existed."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.training import moe
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import predict_step
from gpuplan.data.bundled_calibration import default_training_calibration

CAL = default_training_calibration()
H100 = default_catalog().get_gpu("H100-SXM")
QWEN3_235B = get_model("Qwen/Qwen3-235B-A22B")  # hidden 4096, 128 experts, top-8, 94 MoE layers
NVLINK_BYTES_PER_S = 900e9 / 2 * 0.7
"""H100 SXM NVLink 4: 900 GB/s both directions (catalog), one direction, at link_efficiency 0.7."""
IB_BYTES_PER_S = 50e9 * 0.7
"""400 Gb/s NDR per GPU = 50 GB/s one direction (ib_bytes_per_s_per_gpu), at link_efficiency 0.7."""
TOKENS = 4096.0
COPY_BYTES = 4096 * 2  # one bf16 hidden state of Qwen3-235B


def test_bundled_link_constants_are_the_ones_checked_by_hand() -> None:
    assert CAL.link_efficiency == 0.7
    assert CAL.ib_bytes_per_s_per_gpu == 50e9
    assert (CAL.hop_latency("nvlink"), CAL.hop_latency("ib")) == (5e-6, 1e-5)


def test_intra_node_alltoall_by_hand() -> None:
    # EP8 in one HGX node: each GPU sends 7/8 of its 4096 x 8 token copies over NVLink.
    sent_bytes = TOKENS * 8 * COPY_BYTES * 7 / 8  # 234.9 MB
    expected = sent_bytes / NVLINK_BYTES_PER_S + 7 * 5e-6  # 0.7457 ms + 35 us
    got = moe.alltoall_s(tokens=TOKENS, model=QWEN3_235B, ep=8, stride=1, gpu=H100, cal=CAL)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(7.807e-4, rel=1e-3)


def test_inter_node_alltoall_sends_one_copy_per_remote_node() -> None:
    # EP32 over 4 nodes: a token's 8 experts reach 3·(1 − (3/4)^8) = 2.6997 other nodes on average,
    # each gets one copy over InfiniBand; NVLink forwards 7/8 of the 8 copies inside the node.
    remote = 3 * (1 - 0.75**8)
    assert moe.remote_nodes_per_token(top_k=8, nodes=4) == pytest.approx(remote)
    ib_s = TOKENS * COPY_BYTES * remote / IB_BYTES_PER_S  # 2.588 ms
    nvl_s = TOKENS * 8 * COPY_BYTES * 7 / 8 / NVLINK_BYTES_PER_S  # 0.746 ms, runs concurrently
    expected = max(ib_s, nvl_s) + 3 * 1e-5 + 7 * 5e-6
    got = moe.alltoall_s(tokens=TOKENS, model=QWEN3_235B, ep=32, stride=1, gpu=H100, cal=CAL)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(2.653e-3, rel=1e-3)
    # Without the per-node deduplication the 24/32 remote copies would take 2.2x longer on IB.
    naive_ib_s = TOKENS * 8 * COPY_BYTES * 24 / 32 / IB_BYTES_PER_S
    assert naive_ib_s / ib_s == pytest.approx(8 * 0.75 / remote)


def test_tokens_per_expert_is_balanced_routing() -> None:
    # 4096 tokens x top-8 over 128 experts held 16 per rank (EP8): 2048 rows per local expert.
    assert moe.tokens_per_expert(tokens=4096, top_k=8, experts=128, ep=8) == 2048


def test_grouped_gemm_efficiency_rises_with_tokens_per_expert_and_halves_at_the_factor() -> None:
    cal = CAL.model_copy(update={"expert_gemm_efficiency": 1.0, "expert_tokens_half": 2048.0})
    # Qwen3-235B: expert width 1536 < hidden 4096, so the size term is below 1.
    h, w, half = 4096, 1536, cal.gemm_half_width
    size = (w / (w + half)) / (h / (h + half))
    eta = moe.expert_gemm_efficiency(model=QWEN3_235B, tokens=4096, ep=8, cal=cal)
    assert eta == pytest.approx(0.5 * size)
    more = moe.expert_gemm_efficiency(model=QWEN3_235B, tokens=4 * 4096, ep=8, cal=cal)
    assert eta < more < size


def _dense_ish(cal_update: dict[str, float]) -> float:
    cal = CAL.model_copy(update=cal_update)
    model = get_model("meta-llama/Llama-3.1-8B")
    job = TrainingJob(seq_len=4096, global_batch=64, dtype="bf16")
    layout = TrainingLayout(tp=2, dp=4, ep=1, zero_stage=1)
    return predict_step(model, H100, job, layout, cal).step_time_s


def test_dense_model_ignores_the_moe_factors() -> None:
    base = _dense_ish({"expert_gemm_efficiency": 1.0, "expert_tokens_half": 0.0})
    assert _dense_ish({"expert_gemm_efficiency": 0.2, "expert_tokens_half": 9000.0}) == base


def test_moe_at_ep1_has_no_all_to_all_and_unit_factors_price_experts_as_dense() -> None:
    job = TrainingJob(seq_len=4096, global_batch=64, dtype="bf16")
    layout = TrainingLayout(tp=8, pp=4, dp=1, ep=1, zero_stage=1, virtual_stages=1)
    assert moe.alltoall_s(tokens=4096, model=QWEN3_235B, ep=1, stride=1, gpu=H100, cal=CAL) == 0.0
    neutral = CAL.model_copy(update={"expert_gemm_efficiency": 1.0, "expert_tokens_half": 0.0})
    # With unit factors only the width term remains: experts narrower than hidden cost more.
    eta = moe.expert_gemm_efficiency(model=QWEN3_235B, tokens=512, ep=1, cal=neutral)
    assert eta < 1.0
    slow = predict_step(QWEN3_235B, H100, job, layout, CAL).compute_s
    fast = predict_step(QWEN3_235B, H100, job, layout, neutral).compute_s
    assert slow > fast

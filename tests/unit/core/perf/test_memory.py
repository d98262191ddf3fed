"""Per-GPU memory: weights, KV cache, usable capacity and the engines' KV-pool rules, by hand."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.arith import param_counts
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import (
    activation_peak_bytes,
    inference_memory,
    kv_bytes_for_sequence_per_gpu,
    kv_bytes_per_sequence_at_len,
    kv_bytes_per_token_per_gpu,
    usable_memory_bytes,
    weight_bytes_per_gpu,
)
from gpuplan.core.units import GIB

LLAMA_8B_PARAMS = 8_030_261_248
LLAMA_8B_EMBED = 128_256 * 4096  # vocab x hidden = 525,336,576 (embedding and untied LM head each)


def _llama8b_activation(tokens: int, seqs: int, tp: int = 1) -> float:
    """Hand formula: (3 x ffn 14336 + qkv (32 + 2 x 8) x 128) / tp + 2 x hidden 4096, 2 bytes each, per
    token; plus fp32 logits over the 128,256-token vocab for each sampled sequence."""
    per_token = (3 * 14_336 + (32 + 2 * 8) * 128) / tp + 2 * 4096
    return tokens * per_token * 2 + seqs * 128_256 / tp * 4


# --- weights -----------------------------------------------------------------------------------


def test_llama8b_param_count_is_the_published_one(llama8b: ModelSpec) -> None:
    counts = param_counts(llama8b)
    assert counts.total == LLAMA_8B_PARAMS
    assert counts.embedding == counts.lm_head == LLAMA_8B_EMBED


def test_llama8b_bf16_weights(llama8b: ModelSpec) -> None:
    # 8,030,261,248 params x 2 bytes = 16,060,522,496 bytes (14.96 GiB).
    w = weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("bf16"), tp=1)
    assert w.total == LLAMA_8B_PARAMS * 2 == 16_060_522_496
    assert w.embeddings == 2 * LLAMA_8B_EMBED * 2
    assert w.routed_experts == 0
    assert w.total / GIB == pytest.approx(14.957, abs=1e-3)


def test_tp2_halves_the_weights(llama8b: ModelSpec) -> None:
    one = weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("bf16"), tp=1)
    two = weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("bf16"), tp=2)
    assert two.total == LLAMA_8B_PARAMS * 2 / 2
    assert two.embeddings == one.embeddings / 2


def test_fp8_weights_keep_embeddings_in_16_bits(llama8b: ModelSpec) -> None:
    counts = param_counts(llama8b)
    linears = counts.total - counts.embedding - counts.lm_head  # 6,979,588,096 (incl. norms)
    assert linears == 6_979_588_096
    fp8 = (8 + 32 / (128 * 128)) / 8  # 1.000244 bytes: one fp32 scale per 128x128 block
    expected = linears * fp8 + (counts.embedding + counts.lm_head) * 2
    w = weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("fp8"), tp=1)
    assert w.total == pytest.approx(expected, rel=1e-12)
    # ~ linears at 1 byte + 2 x 525M x 2 bytes = 9.08e9, about 57 % of bf16 (not 50 %).
    assert w.total == pytest.approx(linears * 1 + 2 * LLAMA_8B_EMBED * 2, rel=1e-3)
    assert w.total / (LLAMA_8B_PARAMS * 2) == pytest.approx(0.5655, abs=1e-3)


def test_int4_weights(llama8b: ModelSpec) -> None:
    counts = param_counts(llama8b)
    linears = counts.total - counts.embedding - counts.lm_head
    expected = linears * (4 + 20 / 128) / 8 + 2 * LLAMA_8B_EMBED * 2
    assert weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("int4"), tp=1).total == pytest.approx(
        expected, rel=1e-12
    )


def test_pp_splits_blocks_and_keeps_one_end_embedding(llama8b: ModelSpec) -> None:
    # PP2: linears split in two; the heavier end stage holds one of embedding / LM head (525M x 2 bytes).
    counts = param_counts(llama8b)
    linears = counts.total - counts.embedding - counts.lm_head
    w = weight_bytes_per_gpu(llama8b, weight_dtype=get_dtype("bf16"), tp=1, pp=2)
    assert w.total == linears * 2 / 2 + LLAMA_8B_EMBED * 2


def test_moe_experts_split_over_ep() -> None:
    mixtral = get_model("mistralai/Mixtral-8x7B-v0.1")
    tp2 = weight_bytes_per_gpu(mixtral, weight_dtype=get_dtype("bf16"), tp=2)
    ep8 = weight_bytes_per_gpu(mixtral, weight_dtype=get_dtype("bf16"), tp=2, ep=8)
    assert ep8.routed_experts == pytest.approx(tp2.routed_experts * 2 / 8)
    assert ep8.dense_linear == tp2.dense_linear


# --- KV cache ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (1, 2 * 32 * 8 * 128 * 2),  # K+V x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072
        (2, 131_072 // 2),
        (4, 131_072 // 4),
        (8, 131_072 // 8),
        (16, 131_072 // 8),  # 8 KV heads: beyond TP8 each KV head is replicated, not split further
        (32, 131_072 // 8),
    ],
)
def test_llama8b_kv_bytes_per_token_per_gpu(llama8b: ModelSpec, tp: int, expected: int) -> None:
    assert kv_bytes_per_token_per_gpu(llama8b, kv_dtype=get_dtype("bf16"), tp=tp) == expected


def test_kv_fp8_halves_bf16(llama8b: ModelSpec) -> None:
    fp8 = get_dtype("fp8").bytes_per_element
    assert kv_bytes_per_token_per_gpu(llama8b, kv_dtype=get_dtype("fp8"), tp=1) == pytest.approx(65_536 * fp8)


def test_kv_pp_splits_layers(llama8b: ModelSpec) -> None:
    assert kv_bytes_per_token_per_gpu(llama8b, kv_dtype=get_dtype("bf16"), tp=1, pp=4) == 131_072 / 4


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_mla_latent_is_not_sharded_by_tp(tp: int) -> None:
    ds = get_model("deepseek-ai/DeepSeek-V3")
    # 61 layers x (kv_lora 512 + rope 64) x 2 bytes = 70,272 bytes on every rank.
    assert kv_bytes_per_token_per_gpu(ds, kv_dtype=get_dtype("bf16"), tp=tp) == 61 * 576 * 2 == 70_272


def test_sliding_window_caps_sequence_kv() -> None:
    mistral = get_model("mistralai/Mistral-7B-v0.1")
    # 32 layers x 2 x 8 KV heads x 128 x 2 bytes = 131,072 B/token; window 4096 caps a 10k sequence.
    assert (
        kv_bytes_for_sequence_per_gpu(mistral, tokens=10_000, kv_dtype=get_dtype("bf16"), tp=1)
        == 131_072 * 4096
    )
    assert (
        kv_bytes_for_sequence_per_gpu(mistral, tokens=1000, kv_dtype=get_dtype("bf16"), tp=1)
        == 131_072 * 1000
    )


# --- usable memory -------------------------------------------------------------------------------


def test_usable_memory_hbm(h100: GpuSpec) -> None:
    # "80 GB" of HBM3 is 80 GiB of DRAM; the driver keeps 0.45 GiB.
    assert usable_memory_bytes(h100) == pytest.approx((80 - 0.45) * GIB)


def test_usable_memory_gddr_with_ecc() -> None:
    t4 = default_catalog().get_gpu("T4")
    # 16 GiB less 1/16 for ECC = 15 GiB (nvidia-smi 15360 MiB), less 0.45 GiB driver reservation.
    assert usable_memory_bytes(t4) == pytest.approx((16 * 15 / 16 - 0.45) * GIB)
    assert usable_memory_bytes(t4) / GIB == pytest.approx(14.55)


def test_usable_memory_prefers_catalog_value(h100: GpuSpec) -> None:
    measured = h100.model_copy(update={"usable_memory_bytes": 79.19 * GIB})
    assert usable_memory_bytes(measured) == 79.19 * GIB


# --- engine accounting ---------------------------------------------------------------------------


def test_vllm_kv_pool_identity(llama8b: ModelSpec, h100: GpuSpec) -> None:
    mem = inference_memory(llama8b, h100, Layout())
    usable = (80 - 0.45) * GIB
    # vLLM V1 API server on a >= 70 GiB GPU: 8192 batched tokens and 1024 sequences in the profile run.
    activation = _llama8b_activation(8192, 1024)
    # 8192 x 57,344 x 2 = 939,524,096 plus 1024 x 128,256 x 4 = 525,336,576.
    assert activation == 1_464_860_672
    assert mem.usable_bytes == pytest.approx(usable)
    assert mem.budget_bytes == pytest.approx(usable * 0.9)
    assert mem.weights_bytes == 16_060_522_496
    assert mem.activation_bytes == pytest.approx(activation)
    assert mem.overhead_bytes == pytest.approx(0.2 * GIB)
    expected_pool = usable * 0.9 - 16_060_522_496 - activation - 0.2 * GIB
    assert mem.kv_pool_bytes == pytest.approx(expected_pool)
    assert mem.kv_pool_bytes == pytest.approx(
        mem.budget_bytes - mem.weights_bytes - mem.activation_bytes - mem.overhead_bytes
    )
    assert mem.kv_bytes_per_token == 131_072
    assert mem.max_model_len == 131_072  # max_position_embeddings
    # Concurrency: the pool over one full 131,072-token request (131,072 tokens x 131,072 bytes).
    assert mem.max_concurrency == pytest.approx(expected_pool / 131_072**2)
    assert mem.fits


def test_kv_tokens_is_a_whole_number_of_blocks(llama8b: ModelSpec, h100: GpuSpec) -> None:
    for engine, block in (("vllm", 16), ("trtllm", 32), ("lmdeploy", 64)):
        mem = inference_memory(llama8b, h100, Layout(engine=engine))
        assert mem.kv_tokens % block == 0
        assert mem.kv_tokens == int(mem.kv_pool_bytes // (131_072 * block)) * block
        # The remainder is less than one block.
        assert 0 <= mem.kv_pool_bytes - mem.kv_tokens * 131_072 < block * 131_072


def test_trtllm_pool_is_a_share_of_free_memory(llama8b: ModelSpec, h100: GpuSpec) -> None:
    mem = inference_memory(llama8b, h100, Layout(engine="trtllm"))
    usable = (80 - 0.45) * GIB
    # trtllm-bench defaults: 8192 tokens, 2048 sequences; 2.5 GiB runtime outside torch.
    activation = _llama8b_activation(8192, 2048)
    assert mem.activation_bytes == pytest.approx(activation)
    assert mem.overhead_bytes == pytest.approx(2.5 * GIB)
    assert mem.kv_pool_bytes == pytest.approx((usable - 16_060_522_496 - activation - 2.5 * GIB) * 0.9)


def test_tp2_adds_nccl_buffers_and_halves_weights(llama8b: ModelSpec, h100: GpuSpec) -> None:
    mem = inference_memory(llama8b, h100, Layout(tp=2))
    assert mem.overhead_bytes == pytest.approx((0.2 + 0.25) * GIB)
    assert mem.weights_bytes == 16_060_522_496 / 2
    assert mem.activation_bytes == pytest.approx(_llama8b_activation(8192, 1024, tp=2))
    assert mem.kv_bytes_per_token == 65_536


def test_memory_utilisation_override(llama8b: ModelSpec, h100: GpuSpec) -> None:
    lo = inference_memory(llama8b, h100, Layout(gpu_memory_utilization=0.5))
    hi = inference_memory(llama8b, h100, Layout(gpu_memory_utilization=0.9))
    # Same deductions, so the pools differ by exactly 0.4 x usable.
    assert hi.kv_pool_bytes - lo.kv_pool_bytes == pytest.approx(0.4 * (80 - 0.45) * GIB)


def test_model_too_big_does_not_fit() -> None:
    l4 = default_catalog().get_gpu("L4")
    mem = inference_memory(get_model("meta-llama/Llama-3.1-70B"), l4, Layout())
    assert mem.kv_pool_bytes < 0
    assert mem.kv_tokens == 0
    assert not mem.fits


@pytest.mark.parametrize(("model_id", "window"), [("mistralai/Mistral-7B-v0.1", 4096)])
def test_window_aware_engine_holds_more_requests(h100: GpuSpec, model_id: str, window: int) -> None:
    model = get_model(model_id)
    context = model.max_position_embeddings
    assert context == 32_768
    aware = inference_memory(model, h100, Layout())
    legacy = inference_memory(model, h100, Layout(engine_version="0.8.4"))
    assert aware.kv_pool_bytes == pytest.approx(legacy.kv_pool_bytes)
    assert aware.max_concurrency > legacy.max_concurrency
    # Window-aware: a request holds window - 1 + one 8,192-token prefill chunk = 12,287 tokens;
    # vLLM 0.8.4 holds the whole 32,768-token context.
    assert aware.max_concurrency / legacy.max_concurrency == pytest.approx(context / (window - 1 + 8192))


def test_gpt_oss_window_aware_holds_more_requests(h100: GpuSpec) -> None:
    model = get_model("openai/gpt-oss-20b")
    aware = inference_memory(model, h100, Layout())
    legacy = inference_memory(model, h100, Layout(engine_version="0.8.4"))
    assert aware.max_concurrency > legacy.max_concurrency
    # 12 full layers + 12 window-128 layers: (12 x 131072 + 12 x 131072) / (12 x 131072 + 12 x (127 + 8192)).
    assert aware.max_concurrency / legacy.max_concurrency == pytest.approx(
        (2 * 131_072) / (131_072 + 127 + 8192)
    )


@pytest.mark.parametrize(("max_model_len", "tokens"), [(1024, 2048), (2048, 2048), (8192, 8192)])
def test_vllm_v0_profiles_max_of_model_len_and_2048(
    llama8b: ModelSpec, h100: GpuSpec, max_model_len: int, tokens: int
) -> None:
    mem = inference_memory(llama8b, h100, Layout(engine_version="v0"), max_model_len=max_model_len)
    # V0: 256 sequences and max(max_model_len, 2048) tokens in one step, even on a large GPU.
    assert mem.activation_bytes == pytest.approx(_llama8b_activation(tokens, 256))
    assert mem.activation_bytes == pytest.approx(
        activation_peak_bytes(llama8b, batched_tokens=tokens, max_seqs=256, tp=1)
    )


def test_v0_2048_token_profile_number(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # 2048 x 57,344 x 2 = 234,881,024 plus 256 x 128,256 x 4 = 131,334,144 -> 366,215,168 bytes.
    mem = inference_memory(llama8b, h100, Layout(engine_version="v0"), max_model_len=1024)
    assert mem.activation_bytes == 366_215_168


@pytest.mark.parametrize(
    ("weights", "engine", "explicit", "kv"),
    [
        ("fp8", "vllm", None, "fp8"),  # engines pair fp8 weights with an fp8 cache
        ("fp4", "trtllm", None, "fp8"),  # ModelOpt NVFP4: kv_cache_quant_algo FP8
        ("fp4", "vllm", None, "bf16"),  # MXFP4 (gpt-oss): kv_cache_dtype=auto stays 16-bit
        ("int4", "trtllm", None, "bf16"),
        ("fp4", "trtllm", "bf16", "bf16"),  # an explicit choice wins
        ("bf16", "trtllm", None, "bf16"),
    ],
)
def test_default_kv_dtype_follows_the_checkpoint_convention(
    weights: str, engine: str, explicit: str | None, kv: str
) -> None:
    assert Layout(weight_dtype=weights, engine=engine, kv_dtype=explicit).resolved_kv_dtype == get_dtype(kv)


def test_mamba_state_is_a_fixed_per_sequence_cost(h100: GpuSpec) -> None:
    # Nemotron-3-Nano: 23 Mamba-2 layers x (64 heads x 64 dims x 128 states x 4 B, float32 SSM state
    # per its config's mamba_ssm_cache_dtype + (4096 + 2 x 8 x 128) conv channels x 3 taps x 2 B).
    nano = get_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    per_sequence = 23 * (64 * 64 * 128 * 4 + 6144 * 3 * 2)
    assert nano.recurrent_state_bytes == per_sequence == pytest.approx(46.81 * 2**20, rel=1e-4)
    short = kv_bytes_per_sequence_at_len(
        nano, tokens=1, kv_dtype=get_dtype("bf16"), tp=2, pp=1, chunk_tokens=2048, windows=True
    )
    assert short > per_sequence / 2  # one token already carries the whole (TP-split) state
    mem = inference_memory(nano, h100, Layout(), max_model_len=2048)
    per_request = kv_bytes_per_sequence_at_len(
        nano, tokens=2048, kv_dtype=get_dtype("bf16"), tp=1, pp=1, chunk_tokens=2048, windows=True
    )
    assert mem.max_concurrency == pytest.approx(mem.kv_pool_bytes / per_request)
    assert mem.max_concurrency < mem.kv_pool_bytes / per_sequence  # far fewer than the KV alone would allow
    assert get_model("meta-llama/Llama-3.1-8B").recurrent_state_bytes == 0

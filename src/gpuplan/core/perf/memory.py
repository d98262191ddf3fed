"""Inference memory per GPU: weights, KV cache, activation peak, runtime overhead, KV capacity.

Pure keyword-only functions, hand-checkable. The engine-level accounting follows vLLM V1
(``gpu_worker.determine_available_memory``)::

    kv_pool = usable_total × gpu_memory_utilization − weights − activation_peak − non_torch

and TensorRT-LLM's ``free_gpu_memory_fraction`` (share of what is still free after weights and
activations). SGLang's ``mem_fraction_static`` bounds weights + KV pool together.
"""

from __future__ import annotations

import math

from gpuplan.core.dtypes import FP32, DType
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_profiles import (
    EngineProfile,
    batching_limits,
    is_vllm_v0,
    unchunked_prefill_tokens,
    vllm_v0_batched_tokens,
    window_aware,
)
from gpuplan.core.perf.layout import Layout
from gpuplan.core.units import GB, GIB

GDDR_ECC_FRACTION = 1.0 / 16.0
"""NVIDIA GDDR6 data-centre cards (T4, A10, A10G, L4, L40S) reserve 1/16 of memory for ECC:
T4 16 GiB → 15 GiB (15360 MiB in nvidia-smi), L40S 48 GiB → 45 GiB (46068 MiB, aiconfigurator l40s.yaml)."""
DRIVER_RESERVED_BYTES = 0.45 * GIB
"""CUDA driver/firmware reservation below the physical size: an H100 80GB shows 81559 MiB in
nvidia-smi and torch reports 79.19 GiB total; an RTX 3090 (24 GiB) reports 23.57 GiB."""
NON_TORCH_BYTES = 0.2 * GIB
"""CUDA context and allocator overhead outside torch on one GPU (vLLM prints 0.14-0.35 GiB;
inference_memory.csv non_torch_gib rows IM0045, IM0139)."""
NCCL_BUFFER_BYTES = 0.25 * GIB
"""Extra non-torch memory once NCCL communicators exist (TP/PP > 1; IM0158 prints 0.25 GiB on TP2)."""
TRTLLM_NON_TORCH_BYTES = 2.5 * GIB
"""TensorRT-LLM runtime + cuBLAS workspaces after loading (IM0081 prints 2.52 GiB on H200)."""
LOGIT_BYTES_PER_ELEMENT = 4.0
"""Sampling materialises fp32 logits for every sequence in the profile batch."""
SIXTEEN_BIT = 2.0
FUSED_MOE_CHUNK_TOKENS = 32 * 1024
"""Tokens vLLM's Triton fused-MoE kernel runs at a time, its buffers sized for that many
(``VLLM_FUSED_MOE_CHUNK_SIZE``: ``int(os.getenv(..., "32768"))`` in
https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/envs.py; the ``64 * 1024`` beside it is only
the type-checking stub; used in vllm/model_executor/layers/fused_moe/fused_moe.py)."""


class WeightBytes(FrozenModel):
    """Weight bytes on the most loaded GPU of a replica, by part."""

    total: float
    dense_linear: float
    routed_experts: float
    embeddings: float


class InferenceMemory(FrozenModel):
    """The memory breakdown of one GPU of a replica, and the replica's KV capacity."""

    usable_bytes: float
    budget_bytes: float
    weights_bytes: float
    activation_bytes: float
    overhead_bytes: float
    kv_pool_bytes: float
    kv_bytes_per_token: float
    kv_tokens: int
    max_model_len: int
    max_concurrency: float
    fits: bool


def usable_memory_bytes(gpu: GpuSpec) -> float:
    """What the driver reports as total: catalog value, else nominal GiB less ECC and driver reservation.

    Vendors size HBM and GDDR in binary units ("80 GB" HBM3 = 80 GiB of DRAM), so the nominal
    decimal figure is reinterpreted as GiB before the reservations are taken off.
    """
    if gpu.usable_memory_bytes is not None:
        return gpu.usable_memory_bytes
    physical = gpu.memory_bytes / GB * GIB
    ecc = GDDR_ECC_FRACTION if _has_gddr_ecc(gpu) else 0.0
    return physical * (1.0 - ecc) - DRIVER_RESERVED_BYTES


def _has_gddr_ecc(gpu: GpuSpec) -> bool:
    return gpu.vendor == "NVIDIA" and gpu.id in {"T4", "A10", "A10G", "L4", "L40S"}


def weight_bytes_per_gpu(
    model: ModelSpec, *, weight_dtype: DType, tp: int, pp: int = 1, ep: int = 1, attention_dp: int = 1
) -> WeightBytes:
    """Weight bytes on one GPU: linears in ``weight_dtype``, embeddings and LM head in 16 bits.

    TP shards every matrix (vocab-parallel embedding and LM head included); PP splits the blocks
    (the embedding and LM head sit on the end stages, so the heavier end is counted); routed
    experts are split over max(TP × attention DP, EP) ranks, the dense part (attention, shared
    experts, dense MLPs) is replicated on every attention-DP rank. An EP that leaves a remainder
    holds ceil(E / EP) experts per rank (EPLB's redundant experts fill the rest: DeepSeek's EP144
    places 256 + 32 experts, 2 per GPU). Quantised checkpoints keep embeddings in 16 bits
    (AWQ, GPTQ, FP8-dynamic, MXFP4); gpt-oss's MXFP4 also keeps attention in BF16, per its
    ``quantization_config.modules_to_not_convert``.
    """
    counts = arith.param_counts(model)
    embed_elem = FP32.bytes_per_element if weight_dtype == FP32 else SIXTEEN_BIT
    routed = counts.expert_params_per_expert_per_layer * (
        model.moe.num_experts * model.moe.num_moe_layers if model.moe else 0
    )
    dense = counts.total - counts.embedding - counts.lm_head - routed
    dense_elem = weight_dtype.bytes_per_element
    if model.model_type == "gpt_oss" and weight_dtype.compute_key == "fp4":
        dense_elem = SIXTEEN_BIT
    embed_end = max(counts.embedding, counts.lm_head) if pp > 1 else counts.embedding + counts.lm_head
    embeddings = embed_end * embed_elem / tp
    dense_b = dense * dense_elem / (tp * pp)
    routed_b = (
        routed * weight_dtype.bytes_per_element * _expert_slots(model, ep) / (max(tp * attention_dp, ep) * pp)
    )
    return WeightBytes(
        total=dense_b + routed_b + embeddings,
        dense_linear=dense_b,
        routed_experts=routed_b,
        embeddings=embeddings,
    )


def layout_weight_bytes(model: ModelSpec, layout: Layout) -> WeightBytes:
    """:func:`weight_bytes_per_gpu` for one GPU of ``layout``."""
    return weight_bytes_per_gpu(
        model,
        weight_dtype=layout.weight_dtype,
        tp=layout.tp,
        pp=layout.pp,
        ep=layout.ep,
        attention_dp=layout.attention_dp,
    )


def _expert_slots(model: ModelSpec, ep: int) -> float:
    """Expert slots over experts: ceil(E / ep)·ep / E, 1 when ep divides the experts (or ep = 1)."""
    if model.moe is None or ep <= 1:
        return 1.0
    experts = model.moe.num_experts
    return math.ceil(experts / ep) * ep / experts


def kv_shard(model: ModelSpec, *, tp: int) -> int:
    """How many ways the KV cache is split by TP: KV heads divide over TP, replicated beyond that;
    MLA's latent is replicated on every rank (DeepSeek-V2 §2.1; vLLM MLA backend)."""
    if model.mla is not None or model.attention == "mla":
        return 1
    kv_heads = model.num_kv_heads or model.num_attention_heads or 1
    return min(tp, kv_heads)


def kv_bytes_per_token_per_gpu(model: ModelSpec, *, kv_dtype: DType, tp: int, pp: int = 1) -> float:
    """KV bytes one token costs on one GPU, ignoring sliding windows (the page cost while it is live)."""
    elements = arith.kv_elements_per_token(model)
    return elements * kv_dtype.bytes_per_element / (kv_shard(model, tp=tp) * pp)


def kv_bytes_for_sequence_per_gpu(
    model: ModelSpec, *, tokens: int, kv_dtype: DType, tp: int, pp: int = 1
) -> float:
    """KV bytes a sequence of ``tokens`` holds on one GPU, sliding windows applied per layer group."""
    elements = arith.kv_elements_for_sequence(model, tokens=tokens)
    return elements * kv_dtype.bytes_per_element / (kv_shard(model, tp=tp) * pp)


def activation_peak_bytes(model: ModelSpec, *, batched_tokens: int, max_seqs: int, tp: int) -> float:
    """Peak transient memory of one forward step of ``batched_tokens`` (vLLM's profiling run).

    Live at the MLP of one layer: gate and up projections and their product (3 × ffn width / TP),
    the QKV output and two hidden-size residual buffers, all 16-bit; plus fp32 logits for
    ``max_seqs`` sampled sequences over the vocab split by TP.
    """
    ffn = model.intermediate_size
    if model.moe is not None:
        ffn = max(
            ffn if model.moe.num_moe_layers < model.num_layers else 0,
            model.moe.top_k * model.moe.expert_intermediate_size,
        )
    head_dim = model.head_dim or model.hidden_size // (model.num_attention_heads or 1)
    qkv = (
        (model.num_attention_heads or 1) + 2 * (model.num_kv_heads or model.num_attention_heads or 1)
    ) * head_dim
    per_token = (3 * ffn + qkv) / tp + 2 * model.hidden_size
    logits = max_seqs * model.vocab_size / tp * LOGIT_BYTES_PER_ELEMENT
    return (
        batched_tokens * per_token + _routed_output_elements(model, batched_tokens)
    ) * SIXTEEN_BIT + logits


def _routed_output_elements(model: ModelSpec, batched_tokens: int) -> float:
    """Elements of the fused-MoE kernel's per-expert outputs before the top-k sum: one hidden-size row
    per token and routed expert (``intermediate_cache3``, shape (M, top_k, hidden)), for at most
    ``FUSED_MOE_CHUNK_TOKENS`` tokens at a time."""
    if model.moe is None:
        return 0.0
    return min(batched_tokens, FUSED_MOE_CHUNK_TOKENS) * model.moe.top_k * model.hidden_size


def runtime_overhead_bytes(*, engine: EngineProfile, tp: int, pp: int) -> float:
    """Memory outside the framework's tensors: CUDA context, NCCL buffers, engine workspaces."""
    if engine.name == "trtllm":
        return TRTLLM_NON_TORCH_BYTES
    return NON_TORCH_BYTES + (NCCL_BUFFER_BYTES if tp * pp > 1 else 0.0)


def kv_bytes_per_sequence_at_len(
    model: ModelSpec, *, tokens: int, kv_dtype: DType, tp: int, pp: int, chunk_tokens: int, windows: bool
) -> float:
    """KV bytes the engine sets aside for one request of ``tokens`` on one GPU.

    A sliding-window layer holds its window plus one prefill chunk (vLLM's
    ``SlidingWindowSpec.max_memory_usage_bytes``: window − 1 + max_num_batched_tokens), or the whole
    context when the engine is not window-aware.
    """
    elements = 0
    for group in model.kv_groups:
        held = tokens
        if windows and group.window_tokens:
            held = min(tokens, group.window_tokens - 1 + chunk_tokens)
        elements += group.num_layers * group.elements_per_token_per_layer * held
    kv = elements * kv_dtype.bytes_per_element / (kv_shard(model, tp=tp) * pp)
    return kv + recurrent_state_bytes_per_gpu(model, tp=tp, pp=pp)


def recurrent_state_bytes_per_gpu(model: ModelSpec, *, tp: int, pp: int) -> float:
    """One sequence's Mamba state on one GPU: its heads split over TP, its layers over PP."""
    return model.recurrent_state_bytes / (tp * pp)


def proposer_bytes_per_gpu(model: ModelSpec, layout: Layout) -> tuple[float, float]:
    """(weight bytes, KV bytes per token) on one GPU of the speculative proposer (``perf/speculative.py``):
    a draft model whole, an MTP/EAGLE layer without the embedding and LM head it shares with the
    target; at the target's weight and KV dtypes and TP. (0, 0) without a GPU proposer."""
    spec = layout.speculative
    draft = None if spec is None else spec.proposer(model)
    if spec is None or draft is None:
        return 0.0, 0.0
    parts = weight_bytes_per_gpu(draft, weight_dtype=layout.weight_dtype, tp=layout.tp)
    weights = parts.dense_linear + parts.routed_experts if spec.shares_embeddings else parts.total
    return weights, kv_bytes_per_token_per_gpu(draft, kv_dtype=layout.resolved_kv_dtype, tp=layout.tp)


def inference_memory(
    model: ModelSpec, gpu: GpuSpec, layout: Layout, *, max_model_len: int | None = None
) -> InferenceMemory:
    """Per-GPU breakdown and the replica's KV capacity, the way the engine computes it at start-up.

    ``kv_tokens`` is the pool divided by every layer's per-token cost (what vLLM prints as "GPU KV
    cache size"); ``max_concurrency`` divides the pool by what one full-length request holds.
    """
    engine = layout.engine
    usable = usable_memory_bytes(gpu)
    util = layout.gpu_memory_utilization or engine.default_memory_utilization
    max_seqs, batched = batching_limits(engine, usable_gib=usable / GIB, gpu_id=gpu.id)
    context = max_model_len or model.max_position_embeddings or 4096
    if is_vllm_v0(engine, layout.engine_version):
        whole_prompts = unchunked_prefill_tokens(engine=engine, version=layout.engine_version, model=model)
        max_seqs, batched = engine.max_num_seqs, whole_prompts or vllm_v0_batched_tokens(context)
    draft_weights, draft_kv = proposer_bytes_per_gpu(model, layout)
    weights = draft_weights + layout_weight_bytes(model, layout).total
    activation = activation_peak_bytes(model, batched_tokens=batched, max_seqs=max_seqs, tp=layout.tp)
    overhead = runtime_overhead_bytes(engine=engine, tp=layout.tp, pp=layout.pp)
    pool = _kv_pool(
        engine.name, usable=usable, util=util, weights=weights, activation=activation, overhead=overhead
    )
    per_token, tokens, concurrency = _kv_capacity(
        model, layout, engine, pool_bytes=pool, context_tokens=context, batched_tokens=batched, extra=draft_kv
    )
    return InferenceMemory(
        usable_bytes=usable,
        budget_bytes=usable * util,
        weights_bytes=weights,
        activation_bytes=activation,
        overhead_bytes=overhead,
        kv_pool_bytes=pool,
        kv_bytes_per_token=per_token,
        kv_tokens=tokens,
        max_model_len=context,
        max_concurrency=concurrency,
        fits=pool > 0 and concurrency >= 1.0,
    )


def _kv_capacity(
    model: ModelSpec,
    layout: Layout,
    engine: EngineProfile,
    *,
    pool_bytes: float,
    context_tokens: int,
    batched_tokens: int,
    extra: float = 0.0,
) -> tuple[float, int, float]:
    """(KV bytes per token per GPU, tokens the pool holds in whole blocks, full-length requests it
    holds); a model without KV (per-token cost 0) holds no tokens and unbounded requests. Every
    attention-DP rank holds its own requests' KV in its own pool, so the replica holds
    ``attention_dp`` times one GPU's tokens and requests. ``extra``: a speculative proposer's KV bytes
    per token, held beside the target's."""
    kv_dtype = layout.resolved_kv_dtype
    per_token = extra + kv_bytes_per_token_per_gpu(model, kv_dtype=kv_dtype, tp=layout.tp, pp=layout.pp)
    per_seq = extra * context_tokens + kv_bytes_per_sequence_at_len(
        model,
        tokens=context_tokens,
        kv_dtype=kv_dtype,
        tp=layout.tp,
        pp=layout.pp,
        chunk_tokens=batched_tokens,
        windows=window_aware(engine, layout.engine_version),
    )
    if per_token <= 0:
        return per_token, 0, math.inf
    block, ranks = engine.block_size_tokens, layout.attention_dp
    tokens = int(max(pool_bytes, 0.0) // (per_token * block)) * block
    return per_token, tokens * ranks, max(pool_bytes, 0.0) / per_seq * ranks


def _kv_pool(
    engine: str, *, usable: float, util: float, weights: float, activation: float, overhead: float
) -> float:
    """KV pool bytes on one GPU under each engine's rule (see module docstring)."""
    if engine == "trtllm":
        return (usable - weights - activation - overhead) * util
    if engine == "sglang":
        return usable * util - weights
    return usable * util - weights - activation - overhead

"""Training memory per GPU: weights, gradients, optimizer states, activations, logits, overhead.

Model states (Rajbhandari et al. 2020, ZeRO §3): AdamW mixed precision keeps 2 (bf16 weights) +
2 (bf16 grads) + 12 (fp32 master, m, v) = 16 bytes per trainable parameter; ZeRO-1 shards the 12
over the data-parallel group, ZeRO-2 also the grads, ZeRO-3 / FSDP also the weights, so ZeRO-3
holds 16·N/d. LoRA freezes the base (2 bytes/param bf16; QLoRA nf4 with double quantisation
4.127 bits, Dettmers et al. 2023) and trains only the adapters.

Activations and logits: :mod:`gpuplan.core.training.activations`.

Peak composition. Weights and optimizer states persist. With one micro-batch per step the
gradients and the activations peak at different times (activations at the start of backward,
gradients at its end), so the live peak is ``persistent + max(activations + logits, gradients)``;
with gradient accumulation or pipelining the gradients of earlier micro-batches coexist with the
activations (sum). With the optimizer step fused into backward (torchtune ``optimizer_in_bwd``) a
gradient is freed as soon as it is applied: only the largest one (the vocab × h embedding or LM
head) coexists with the activations. Paged optimizers (bitsandbytes ``Paged*``) keep their states in
CUDA managed memory, outside PyTorch's caching allocator.

Engines (``MemoryOptions``): DeepSpeed's ZeRO optimizer also keeps an fp32 copy of the gradients it
owns (``fp32_grad_copy``, :data:`FP32_GRAD_COPY_BYTES`) and allocates its communication buckets up
front (``bucket_bytes``, :func:`zero_bucket_bytes`).

What a reported number counts (``MemoryOptions.counting``): ``device`` (nvidia-smi) adds the CUDA
context, NCCL buffers and the caching-allocator reserve; ``reserved`` (torch
``max_memory_reserved``, torchtitan's log) adds the reserve only; ``active`` (torch
``active_bytes.all.peak``, torchtune's ``peak_memory_active``) counts live tensors only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.activations import (
    LogitsKind,
    SelectivePolicy,
    activation_bytes_per_token_layer,
    activations_bytes,
    logits_bytes,
)
from gpuplan.core.training.params import lora_params, param_split, shard_params
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.units import GIB

__all__ = [
    "ADAPTER_BYTES",
    "ADAPTER_OPTIMIZER_BYTES",
    "CONTEXT_BYTES",
    "EIGHT_BIT_STATE_BYTES",
    "FP32_BYTES",
    "FP32_GRAD_COPY_BYTES",
    "FRAGMENTATION",
    "FSDP_PREFETCH_LAYERS",
    "NCCL_BYTES",
    "NF4_DOUBLE_QUANT_BYTES",
    "OPTIMIZER_BYTES_MIXED",
    "OPTIMIZER_BYTES_PURE",
    "PAGED_OPTIMIZERS",
    "SIXTEEN_BIT_BYTES",
    "STRANDED_TRANSIENTS",
    "ZERO_BUCKETS_WITH_OVERLAP",
    "Counting",
    "MemoryOptions",
    "TrainingMemory",
    "activation_bytes_per_token_layer",
    "activations_bytes",
    "model_state_bytes",
    "training_memory",
    "zero_bucket_bytes",
]

Counting = Literal["device", "reserved", "active"]

SIXTEEN_BIT_BYTES = 2.0
FP32_BYTES = 4.0
NF4_DOUBLE_QUANT_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8
"""QLoRA NF4: 4 bits + an 8-bit absmax per 64 weights + an fp32 scale per 256 absmax (Dettmers 2023 §3)."""
EIGHT_BIT_STATE_BYTES = 2.0 * (1 + 4 / 256)
"""bitsandbytes 8-bit Adam: m and v as uint8 with an fp32 absmax per 256-value block (Dettmers et al.
2022, "8-bit Optimizers via Block-wise Quantization", §2; https://github.com/bitsandbytes-foundation/
bitsandbytes/blob/main/bitsandbytes/optim/optimizer.py, ``Optimizer8bit`` block size 256)."""
OPTIMIZER_BYTES_MIXED = {
    "adamw": 12.0,
    "adamw_8bit": 4.0 + EIGHT_BIT_STATE_BYTES,
    "paged_adamw_8bit": 4.0 + EIGHT_BIT_STATE_BYTES,
    "sgd": 8.0,
}
"""Per trainable param with fp32 master weights: AdamW master+m+v 4+4+4; 8-bit Adam master 4 +
m,v ≈ 1+1; SGD with momentum master 4 + momentum 4."""
OPTIMIZER_BYTES_PURE = {
    "adamw": 4.0,
    "adamw_8bit": EIGHT_BIT_STATE_BYTES,
    "paged_adamw_8bit": EIGHT_BIT_STATE_BYTES,
    "sgd": 2.0,
}
"""Pure-bf16 training without master weights (torchtune ``dtype: bf16``): AdamW m, v in bf16."""
PAGED_OPTIMIZERS = frozenset({"paged_adamw_8bit"})
"""States in CUDA managed memory (cudaMallocManaged), evicted to host under pressure and invisible
to torch.cuda memory stats: https://huggingface.co/docs/bitsandbytes/main/en/explanations/optimizers#paged-optimizers."""
ADAPTER_BYTES = 16.0
"""LoRA adapters train in fp32 (PEFT's default): weights 4 + grads 4 + AdamW m, v 8 = 16 bytes per param."""
ADAPTER_OPTIMIZER_BYTES = {
    "adamw": 8.0,
    "adamw_8bit": EIGHT_BIT_STATE_BYTES,
    "paged_adamw_8bit": EIGHT_BIT_STATE_BYTES,
    "sgd": 4.0,
}
"""Optimizer state per fp32 adapter parameter (no master copy: the adapters are fp32 already)."""
CONTEXT_BYTES = 0.5 * GIB
"""CUDA context, cuBLAS/cuDNN workspaces outside the caching allocator (PyTorch ~0.3-0.6 GiB)."""
FRAGMENTATION = 0.05
"""PyTorch caching-allocator reserve (``reserved − allocated``) at the training peak: 5 %
(https://pytorch.org/docs/stable/notes/cuda.html#memory-management; torchtitan logs reserved,
torchtune logs active)."""
STRANDED_TRANSIENTS = 1.0
"""Steps of different lengths (batches padded to their own longest sequence) make the caching
allocator cut new segments for a longer step while earlier, shorter ones stay partly occupied: the
PyTorch notes describe the slivers this strands ("a job changing allocation sizes frequently",
``expandable_segments``: https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf).
Bound: the reserve holds one more step's transient tensors (activations and logits)."""
NCCL_BYTES = 0.5 * GIB
"""NCCL communicator buffers once a process group spans more than one GPU."""
FP32_GRAD_COPY_BYTES = 4.0
"""DeepSpeed ZeRO-1/2/3 hold, per parameter they own, 16 bytes of fp32 state: master weight, m, v and
an fp32 gradient; its memory estimator prices ZeRO-2 at 4·N + 16·N/d and ZeRO-3 at 18·N/d
(``estimate_zero2_model_states_mem_needs``, ``estimate_zero3_model_states_mem_needs``:
https://deepspeed.readthedocs.io/en/latest/memory.html). The gradient copy is the 4 bytes beyond
AdamW's 12."""
ZERO_BUCKETS_WITH_OVERLAP = 2
"""DeepSpeed ZeRO-1/2 with ``contiguous_gradients`` allocate a 16-bit reduce bucket of
``reduce_bucket_size`` elements, and a second one with ``overlap_comm``
(``ipg_buffer`` in deepspeed/runtime/zero/stage_1_and_2.py:
https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/zero/stage_1_and_2.py)."""
FSDP_PREFETCH_LAYERS = 2
"""FSDP gathers one layer unsharded and prefetches the next: 2 layers of bf16 params + fp32 grads."""


class MemoryOptions(FrozenModel):
    """How a framework runs and reports memory (module docstring); defaults = plain PyTorch mixed precision."""

    pure_bf16: bool = False
    counting: Counting = "device"
    logits: LogitsKind = "full"
    selective_policy: SelectivePolicy = "korthikanti"
    fp32_grad_copy: bool = False
    variable_lengths: bool = False
    bucket_bytes: float = Field(default=0.0, ge=0.0)


class TrainingMemory(FrozenModel):
    """Bytes on the most loaded GPU, by part, and the total. Gradients and activations peak at
    different times when nothing accumulates, so the parts can add up to more than the total;
    ``activations_bytes`` includes FSDP's unsharded parameter/gradient buffers."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float
    overhead_bytes: float
    reserve_bytes: float = Field(
        default=0.0,
        description="the caching allocator's cache inside overhead_bytes, given back before an OOM",
    )
    total_bytes: float


def zero_bucket_bytes(reduce_bucket_elements: float, *, overlap_comm: bool = True) -> float:
    """Bytes of DeepSpeed ZeRO-1/2's up-front 16-bit reduce buckets (:data:`ZERO_BUCKETS_WITH_OVERLAP`)."""
    return (ZERO_BUCKETS_WITH_OVERLAP if overlap_comm else 1) * reduce_bucket_elements * SIXTEEN_BIT_BYTES


def _optimizer_bytes_per_param(job: TrainingJob, *, pure_bf16: bool) -> float:
    table = OPTIMIZER_BYTES_PURE if pure_bf16 else OPTIMIZER_BYTES_MIXED
    return table[job.optimizer]


def _grad_copy_bytes(model: ModelSpec, job: TrainingJob, layout: TrainingLayout) -> float:
    """An fp32 copy of the gradients whose optimizer states this GPU owns (DeepSpeed ZeRO)."""
    if job.is_adapter:
        owned = lora_params(model, rank=job.lora_rank, targets=job.lora_targets) / (layout.tp * layout.pp)
        return FP32_GRAD_COPY_BYTES * owned
    dense, routed = shard_params(model, tp=layout.tp, pp=layout.pp, ep=layout.ep)
    if layout.zero_stage >= 1:
        shards = layout.dp * layout.cp
        dense, routed = dense / shards, routed / max(shards / layout.ep, 1.0)
    return 0.0 if layout.cpu_offload else FP32_GRAD_COPY_BYTES * (dense + routed)


def _adapter_states(model: ModelSpec, job: TrainingJob, layout: TrainingLayout) -> tuple[float, float, float]:
    dense, routed = shard_params(model, tp=layout.tp, pp=layout.pp, ep=layout.ep)
    local = dense + routed
    embeddings = param_split(model).embeddings / (layout.tp * layout.pp)
    base = SIXTEEN_BIT_BYTES * local
    if job.method == "qlora":
        base = NF4_DOUBLE_QUANT_BYTES * (local - embeddings) + SIXTEEN_BIT_BYTES * embeddings
    if layout.zero_stage >= 3 and layout.dp * layout.cp > 1:
        base /= layout.dp * layout.cp  # ZeRO-3 / FSDP shards frozen parameters too (DeepSpeed stage 3)
    adapters = lora_params(model, rank=job.lora_rank, targets=job.lora_targets) / (layout.tp * layout.pp)
    optimizer = ADAPTER_OPTIMIZER_BYTES[job.optimizer] * adapters
    return base + FP32_BYTES * adapters, FP32_BYTES * adapters, optimizer


def model_state_bytes(
    model: ModelSpec, job: TrainingJob, layout: TrainingLayout, *, pure_bf16: bool = False
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes on one GPU."""
    if job.is_adapter:
        return _adapter_states(model, job, layout)
    dense, routed = shard_params(model, tp=layout.tp, pp=layout.pp, ep=layout.ep)
    shards = layout.dp * layout.cp
    local = dense + routed
    sharded = dense / shards + routed / max(shards / layout.ep, 1.0)
    stage = layout.zero_stage
    weights = SIXTEEN_BIT_BYTES * (sharded if stage >= 3 else local)
    grads = SIXTEEN_BIT_BYTES * (sharded if stage >= 2 else local)
    optimizer = _optimizer_bytes_per_param(job, pure_bf16=pure_bf16) * (sharded if stage >= 1 else local)
    return weights, grads, 0.0 if layout.cpu_offload else optimizer


def _fsdp_extra_bytes(model: ModelSpec, job: TrainingJob, layout: TrainingLayout) -> float:
    """Unsharded FSDP buffers: 2 prefetched layers; with PP the whole stage (torchtitan sets
    ``reshard_after_forward=False`` under PP and FSDP2 accumulates unsharded gradients in the fp32
    reduce dtype across micro-batches: https://github.com/pytorch/torchtitan/blob/main/torchtitan/
    models/llama3/infra/parallelize.py, torch/distributed/fsdp/_fully_shard/_fsdp_param.py)."""
    if layout.zero_stage < 3 or layout.dp * layout.cp <= 1:
        return 0.0
    if job.is_adapter:  # gathered frozen layers only: no gradient buffers for them
        return FSDP_PREFETCH_LAYERS * param_split(model).per_layer_dense / layout.tp * SIXTEEN_BIT_BYTES
    if layout.pp > 1:
        dense, routed = shard_params(model, tp=layout.tp, pp=layout.pp, ep=layout.ep)
        return (dense + routed) * (SIXTEEN_BIT_BYTES + FP32_BYTES)
    return (
        FSDP_PREFETCH_LAYERS
        * param_split(model).per_layer_dense
        / layout.tp
        * (SIXTEEN_BIT_BYTES + FP32_BYTES)
    )


def _largest_grad_bytes(model: ModelSpec, layout: TrainingLayout) -> float:
    """Largest single gradient (the vocab × h embedding or LM head), all that optimizer-in-backward keeps."""
    return SIXTEEN_BIT_BYTES * model.vocab_size * model.hidden_size / layout.tp


def _live_bytes(
    parts: dict[str, float], job: TrainingJob, layout: TrainingLayout, micro_batches: int
) -> float:
    persistent = parts["weights"] + parts["optimizer"] + parts["fsdp"]
    transient = parts["acts"] + parts["logits"]
    if job.optimizer_in_backward and not job.is_adapter:
        return persistent + transient + parts["grad_in_bwd"]
    if micro_batches > 1 or layout.pp > 1:
        return persistent + transient + parts["grads"]
    return persistent + max(transient, parts["grads"])


def _overhead(live: float, stranded: float, layout: TrainingLayout, counting: Counting) -> float:
    """What the count adds to the live bytes: the allocator's reserve (and ``stranded`` transients),
    plus the CUDA context and NCCL buffers on a whole-device count."""
    if counting == "active":
        return 0.0
    reserve = FRAGMENTATION * live + stranded
    if counting == "reserved":
        return reserve
    return CONTEXT_BYTES + reserve + (NCCL_BYTES if layout.num_gpus > 1 else 0.0)


def training_memory(
    model: ModelSpec,
    job: TrainingJob,
    layout: TrainingLayout,
    *,
    micro_batches: int = 1,
    pure_bf16: bool = False,
    options: MemoryOptions | None = None,
) -> TrainingMemory:
    """Peak bytes on one GPU for ``job`` under ``layout`` (module docstring gives the formulas)."""
    opts = options or MemoryOptions(pure_bf16=pure_bf16)
    weights, grads, optimizer = model_state_bytes(model, job, layout, pure_bf16=opts.pure_bf16)
    if opts.fp32_grad_copy:
        optimizer += _grad_copy_bytes(model, job, layout)
    if job.optimizer in PAGED_OPTIMIZERS and opts.counting != "device":
        optimizer = 0.0
    parts = {
        "weights": weights,
        "grads": grads,
        "optimizer": optimizer,
        "fsdp": _fsdp_extra_bytes(model, job, layout),
        "acts": activations_bytes(
            model, job, layout, micro_batches=micro_batches, policy=opts.selective_policy
        ),
        "logits": logits_bytes(model, job, layout, opts.logits),
        "grad_in_bwd": _largest_grad_bytes(model, layout),
    }
    live = _live_bytes(parts, job, layout, micro_batches) + opts.bucket_bytes
    stranded = STRANDED_TRANSIENTS * (parts["acts"] + parts["logits"]) if opts.variable_lengths else 0.0
    overhead = _overhead(live, stranded, layout, opts.counting)
    return TrainingMemory(
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=optimizer,
        activations_bytes=parts["acts"] + parts["fsdp"],
        logits_bytes=parts["logits"],
        overhead_bytes=overhead,
        reserve_bytes=0.0 if opts.counting == "active" else FRAGMENTATION * live + stranded,
        total_bytes=live + overhead,
    )

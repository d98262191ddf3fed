"""Training memory per GPU: weights, gradients, optimizer states, activations, logits, overhead.

Model states (Rajbhandari et al. 2020, ZeRO §3): AdamW mixed precision keeps 2 (bf16 weights) +
2 (bf16 grads) + 12 (fp32 master, m, v) = 16 bytes per trainable parameter; ZeRO-1 shards the 12
over the data-parallel group, ZeRO-2 also the grads, ZeRO-3 / FSDP also the weights, so ZeRO-3
holds 16·N/d. LoRA freezes the base (2 bytes/param bf16; QLoRA nf4 with double quantisation
4.127 bits, Dettmers et al. 2023) and trains only the adapters.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation", eq. 1-2) per layer and
token, in bytes, 16-bit, with FlashAttention (no s² score matrix) and sequence parallelism (/tp):
norms 4h + attention 2h + 2(q + 2kv) + 2q + MLP 2h + 2·m·I (m = 3 gated, 2 plain; MoE: top_k
experts). Full checkpointing keeps only each layer's input (2h) plus one layer's working set;
selective recompute drops the attention core, which FlashAttention already does not store. With
1F1B pipelining the first stage holds ``min(pp, m)`` micro-batches of its ``L/pp`` layers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuplan.models.spec import ModelSpec
from gpuplan.training.params import lora_params, param_split, shard_params, widths
from gpuplan.training.spec import TrainingJob, TrainingLayout
from gpuplan.units import GIB

SIXTEEN_BIT_BYTES = 2.0
NF4_DOUBLE_QUANT_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8
"""QLoRA NF4: 4 bits + an 8-bit absmax per 64 weights + an fp32 scale per 256 absmax (Dettmers 2023 §3)."""
OPTIMIZER_BYTES_MIXED = {"adamw": 12.0, "adamw_8bit": 6.0, "sgd": 8.0}
"""Per trainable param with fp32 master weights: AdamW master+m+v 4+4+4; bitsandbytes 8-bit Adam
master 4 + m,v 1+1; SGD with momentum master 4 + momentum 4."""
OPTIMIZER_BYTES_PURE = {"adamw": 4.0, "adamw_8bit": 2.0, "sgd": 2.0}
"""Pure-bf16 training without master weights (torchtune's default): AdamW m, v in bf16."""
ADAPTER_BYTES = 16.0
"""LoRA adapters train in mixed precision: weights + grads + AdamW states, 16 bytes per param."""
LOGIT_BYTES_PER_ELEMENT = 12.0
"""bf16 logits (2) + fp32 upcast (4) + fp32 log-softmax/gradient (4) + slack: Qwen finetune.py
full_ft rows M0054→M0055 grow 3.35 GiB for +2048 tokens at vocab 151936 (≈ 11.5 B/element)."""
CONTEXT_BYTES = 0.5 * GIB
"""CUDA context, cuBLAS/cuDNN workspaces outside the caching allocator (PyTorch ~0.3-0.6 GiB)."""
FRAGMENTATION = 0.05
"""PyTorch caching-allocator reserve over live tensors at the peak (5 %, typical for training)."""
SELECTIVE_KEPT_FRACTION = 0.5
"""Selective checkpointing as frameworks ship it (torchtitan op-level SAC, Megatron selective with
FlashAttention) keeps about every other large activation and recomputes the rest."""
NCCL_BYTES = 0.5 * GIB
"""NCCL communicator buffers once a process group spans more than one GPU."""


class TrainingMemory(BaseModel):
    """Bytes on the most loaded GPU, by part, and the total."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float
    overhead_bytes: float
    total_bytes: float


def _optimizer_bytes_per_param(job: TrainingJob, *, pure_bf16: bool) -> float:
    table = OPTIMIZER_BYTES_PURE if pure_bf16 else OPTIMIZER_BYTES_MIXED
    return table[job.optimizer]


def model_state_bytes(
    model: ModelSpec, job: TrainingJob, layout: TrainingLayout, *, pure_bf16: bool = False
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes on one GPU."""
    dense, routed = shard_params(model, tp=layout.tp, pp=layout.pp, ep=layout.ep)
    shards = layout.dp * layout.cp
    local = dense + routed
    sharded = dense / shards + routed / max(shards / layout.ep, 1.0)
    if job.is_adapter:
        embeddings = param_split(model).embeddings / (layout.tp * layout.pp)
        base = SIXTEEN_BIT_BYTES * local
        if job.method == "qlora":
            base = NF4_DOUBLE_QUANT_BYTES * (local - embeddings) + SIXTEEN_BIT_BYTES * embeddings
        adapters = lora_params(model, rank=job.lora_rank, targets=job.lora_targets) / (layout.tp * layout.pp)
        return base + ADAPTER_BYTES / 4 * adapters, ADAPTER_BYTES / 4 * adapters, ADAPTER_BYTES / 2 * adapters
    stage = layout.zero_stage
    weights = SIXTEEN_BIT_BYTES * (sharded if stage >= 3 else local)
    grads = SIXTEEN_BIT_BYTES * (sharded if stage >= 2 else local)
    optimizer = _optimizer_bytes_per_param(job, pure_bf16=pure_bf16) * (sharded if stage >= 1 else local)
    return weights, grads, 0.0 if layout.cpu_offload else optimizer


def _mlp_bytes(h: int, width: int, mats: int) -> float:
    return 2.0 * h + 2.0 * mats * width


def activation_bytes_per_token_layer(model: ModelSpec) -> float:
    """Stored activation bytes for one token in one layer, no recompute (module docstring)."""
    h = model.hidden_size
    q, kv = widths(model)
    mats = 3 if model.mlp_kind == "gated" else 2
    attention = 4.0 * h + 2.0 * h + 2.0 * (q + 2 * kv) + 2.0 * q
    mlp = _mlp_bytes(h, model.intermediate_size, mats)
    if model.moe is not None:
        moe = model.moe
        routed = moe.top_k * _mlp_bytes(h, moe.expert_intermediate_size, mats)
        shared = _mlp_bytes(h, moe.shared_intermediate_size, mats) if moe.shared_intermediate_size else 0.0
        moe_mlp = routed + shared
        n_moe = moe.num_moe_layers
        mlp = (moe_mlp * n_moe + mlp * (model.num_layers - n_moe)) / model.num_layers
    return attention + mlp


def activations_bytes(model: ModelSpec, job: TrainingJob, layout: TrainingLayout, *, micro_batches: int) -> float:
    """Activation bytes on the first pipeline stage at the peak of 1F1B."""
    tokens = layout.micro_batch * job.seq_len / layout.cp
    per_layer = activation_bytes_per_token_layer(model) * tokens / layout.tp
    layers = model.num_layers / layout.pp
    in_flight = min(layout.pp, max(micro_batches, 1))
    if layout.checkpointing == "full":
        stored = SIXTEEN_BIT_BYTES * model.hidden_size * tokens / layout.tp
        return stored * layers * in_flight + per_layer
    kept = SELECTIVE_KEPT_FRACTION if layout.checkpointing == "selective" else 1.0
    return kept * per_layer * layers * in_flight


def training_memory(
    model: ModelSpec, job: TrainingJob, layout: TrainingLayout, *, micro_batches: int = 1, pure_bf16: bool = False
) -> TrainingMemory:
    """Peak bytes on one GPU for ``job`` under ``layout`` (module docstring gives the formulas)."""
    weights, grads, optimizer = model_state_bytes(model, job, layout, pure_bf16=pure_bf16)
    acts = activations_bytes(model, job, layout, micro_batches=micro_batches)
    logits = LOGIT_BYTES_PER_ELEMENT * layout.micro_batch * job.seq_len / layout.cp * model.vocab_size / layout.tp
    if layout.zero_stage >= 3 and not job.is_adapter and layout.dp * layout.cp > 1:
        # FSDP gathers one layer unsharded and prefetches the next: 2 layers of bf16 params + fp32 grads.
        acts += 2 * param_split(model).per_layer_dense / layout.tp * (SIXTEEN_BIT_BYTES + 4.0)
    live = weights + grads + optimizer + acts + logits
    overhead = CONTEXT_BYTES + FRAGMENTATION * live + (NCCL_BYTES if layout.num_gpus > 1 else 0.0)
    return TrainingMemory(
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=optimizer,
        activations_bytes=acts,
        logits_bytes=logits,
        overhead_bytes=overhead,
        total_bytes=live + overhead,
    )

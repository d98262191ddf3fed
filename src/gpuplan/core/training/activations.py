"""Activation and logits memory of training: what each checkpointing policy keeps, pipeline in-flight counts.

Per token and layer, 16-bit, FlashAttention (no s² scores), sequence parallel ÷ tp (Korthikanti et
al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Table 2, generalised to
GQA and gated MLPs): norms 4h + attention 2h + 2(q + 2kv) + 2q + MLP 2h + 2·m·I.

* ``none`` keeps all of it.
* ``selective`` with the ``korthikanti`` policy recomputes only the attention core (softmax,
  dropout, QKᵀ: the 5as/h term of Table 2), which FlashAttention never stores, so it keeps the same
  34·sbh-type bytes as ``none`` (Megatron-LM / NeMo ``recompute_granularity=selective``).
* ``selective`` with the ``every_other_mm`` policy is torchtitan's op-level SAC: it saves the
  outputs of every second matmul (wk, wo, w3 of a Llama block) and the attention output, and
  recomputes norms, element-wise ops and the other matmuls from the block input.
* ``full`` keeps the block input (2h) and recomputes the block in backward, where one layer's
  activations and their gradients coexist (``BACKWARD_WORKING_SET``).

1F1B pipelining keeps ``min(p, m)`` micro-batches of the first stage's ``L/p`` layers in flight;
the interleaved schedule with ``v`` chunks per rank keeps ``2(p−1) + (v−1)p + 1`` chunk-micro-batches
of ``L/(p·v)`` layers (Narayanan et al. 2021 §2.2; torch.distributed.pipelining ``Interleaved1F1B``
warm-up).
"""

from __future__ import annotations

from typing import Literal

from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.params import widths
from gpuplan.core.training.spec import TrainingJob, TrainingLayout

SelectivePolicy = Literal["korthikanti", "every_other_mm"]
LogitsKind = Literal["full", "half", "chunked", "fused"]

SIXTEEN_BIT = 2.0
BACKWARD_WORKING_SET = 2.0
"""Recomputing a checkpointed block in backward holds its activations and their gradients:
2 × one layer's stored bytes (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost" §4)."""
LOGIT_BYTES: dict[LogitsKind, float] = {"full": 12.0, "half": 6.0, "chunked": 3.0, "fused": 0.0}
"""Bytes per (token × vocab) element at the loss.
``full``: bf16 logits (2) + fp32 upcast (4) + fp32 log-softmax / gradient (4) + slack; Qwen
finetune.py rows M0054→M0055 grow 3.35 GiB for +2048 tokens at vocab 151936 (≈ 11.5 B).
``half``: a model run in its 16-bit dtype without autocast (DeepSpeed's fp16/bf16 engine casts the
module and HF Trainer then runs no autocast: https://huggingface.co/docs/transformers/main/en/deepspeed)
keeps the logits (2), their shifted contiguous copy (2) and the log-softmax (2) in 16 bits: 6 B.
``chunked``: torchtune ``CEWithChunkedOutputLoss`` keeps all bf16 logit chunks (2) and upcasts one of
8 chunks at a time (fp32 value + gradient, 8/8 = 1) —
https://github.com/pytorch/torchtune/blob/main/torchtune/modules/loss/ce_chunked_output_loss.py.
``fused``: the logits are never materialised (Cut Cross-Entropy, Wijmans et al. 2024,
arXiv:2411.09009, used by Unsloth; Liger / torchtune ``LinearCrossEntropyLoss``)."""


def _mlp_bytes(h: int, width: int, mats: int) -> float:
    return 2.0 * h + 2.0 * mats * width


def _mean_mlp(model: ModelSpec, dense: float, per_expert: float, shared: float) -> float:
    if model.moe is None:
        return dense
    n_moe = model.moe.num_moe_layers
    return (
        (model.moe.top_k * per_expert + shared) * n_moe + dense * (model.num_layers - n_moe)
    ) / model.num_layers


def activation_bytes_per_token_layer(model: ModelSpec) -> float:
    """Stored activation bytes for one token in one layer, no recompute (module docstring)."""
    h = model.hidden_size
    q, kv = widths(model)
    mats = 3 if model.mlp_kind == "gated" else 2
    attention = 4.0 * h + 2.0 * h + 2.0 * (q + 2 * kv) + 2.0 * q
    dense = _mlp_bytes(h, model.intermediate_size, mats)
    if model.moe is None:
        return attention + dense
    moe = model.moe
    shared = _mlp_bytes(h, moe.shared_intermediate_size, mats) if moe.shared_intermediate_size else 0.0
    return attention + _mean_mlp(model, dense, _mlp_bytes(h, moe.expert_intermediate_size, mats), shared)


def every_other_mm_bytes_per_token_layer(model: ModelSpec) -> float:
    """torchtitan op-level SAC: block input 2h + saved matmul outputs wk (kv), wo (h), w3 (I) + attention out 2q.

    Policy ``_save_list`` with "save every other mm" in
    https://github.com/pytorch/torchtitan/blob/main/torchtitan/models/llama3/infra/parallelize.py."""
    h = model.hidden_size
    q, kv = widths(model)
    up = float(model.intermediate_size)
    if model.moe is not None:
        expert = float(model.moe.expert_intermediate_size)
        up = _mean_mlp(model, up, expert, float(model.moe.shared_intermediate_size or 0))
    return 2.0 * h + 2.0 * (kv + h + up) + 2.0 * q


def in_flight_stage_micro_batches(layout: TrainingLayout, micro_batches: int) -> float:
    """Micro-batches of a full stage (L/p layers) whose activations the first stage holds at the peak."""
    p, v, m = layout.pp, layout.virtual_stages, max(micro_batches, 1)
    if p <= 1:
        return 1.0
    if v <= 1:
        return float(min(p, m))
    chunks = min(2 * (p - 1) + (v - 1) * p + 1, m * v)
    return chunks / v


def activations_bytes(
    model: ModelSpec,
    job: TrainingJob,
    layout: TrainingLayout,
    *,
    micro_batches: int,
    policy: SelectivePolicy = "korthikanti",
) -> float:
    """Activation bytes on the first pipeline stage at the peak (module docstring)."""
    tokens = layout.micro_batch * job.seq_len / layout.cp
    per_layer = activation_bytes_per_token_layer(model) * tokens / layout.tp
    layers = model.num_layers / layout.pp
    in_flight = in_flight_stage_micro_batches(layout, micro_batches)
    if layout.checkpointing == "none":
        return per_layer * layers * in_flight
    if layout.checkpointing == "selective" and policy == "korthikanti":
        return per_layer * layers * in_flight
    if layout.checkpointing == "selective":
        kept = every_other_mm_bytes_per_token_layer(model) * tokens / layout.tp
        return kept * layers * in_flight + BACKWARD_WORKING_SET * per_layer
    stored = SIXTEEN_BIT * model.hidden_size * tokens / layout.tp
    kept_on_gpu = 0.0 if layout.activation_offload else stored * layers * in_flight
    return kept_on_gpu + BACKWARD_WORKING_SET * per_layer


def logits_bytes(
    model: ModelSpec, job: TrainingJob, layout: TrainingLayout, kind: LogitsKind = "full"
) -> float:
    """Loss-side bytes of the last stage: (tokens × vocab / tp) elements at ``LOGIT_BYTES[kind]``."""
    tokens = layout.micro_batch * job.seq_len / layout.cp
    return LOGIT_BYTES[kind] * tokens * model.vocab_size / layout.tp

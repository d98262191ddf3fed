"""What to train and how it is laid out: :class:`TrainingJob` and :class:`TrainingLayout`.

Both are frozen pydantic models with ``extra="forbid"``; :func:`check_layout` raises a one-line
:class:`UserInputError` for layouts that cannot run (batch not divisible, TP not dividing heads …).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT, MAX_PARALLEL_DEGREE
from gpuplan.core.model.spec import MAX_HIDDEN_SIZE, MAX_LAYERS, MAX_POSITIONS, ModelSpec

Method = Literal["pretrain", "full_ft", "lora", "qlora"]
Checkpointing = Literal["none", "selective", "full"]
Optimizer = Literal["adamw", "adamw_8bit", "paged_adamw_8bit", "sgd"]
ComputeDtype = Literal["bf16", "fp16", "fp8", "fp4"]
LoraTargets = Literal["all", "attention"]
KernelLaunch = Literal["eager", "fused"]

MAX_SEQ_LEN = MAX_POSITIONS
"""A sequence is at most a model's positions (``core.model.spec.MAX_POSITIONS``)."""
MAX_GLOBAL_BATCH = 1_048_576
"""Sequences per optimizer step: 512x PaLM 540B's and Llama 3 405B's 2,048 (Chowdhery et al. 2022;
Llama 3 paper, 16M tokens of 8,192); also bounds a micro-batch."""
MAX_LORA_RANK = MAX_HIDDEN_SIZE
"""A LoRA rank is at most the width it adapts (``core.model.spec.MAX_HIDDEN_SIZE``)."""
MAX_TRAIN_TOKENS = 1e15
"""About 28x Qwen3's 36 trillion pretraining tokens (Qwen3 technical report, 2025), the largest
published budget; also bounds a dataset's sequences (one token each at least)."""
DEFAULT_LORA_RANK = 16
"""PEFT / torchtune recipes default to rank 8-16; 16 is the common published choice."""
LAYERS_PER_CHUNK = 2
"""Transformer layers per model chunk of an interleaved pipeline in published large-scale recipes:
NeMo's Llama-3.1-405B (PP8, VP8), GPT-3 175B (PP8, VP6) and Llama-3-70B (PP8, VP5) hold about 2;
it is the median over the training.csv rows that state VP (performance_summary.html at
https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html)."""


class TrainingJob(FrozenModel):
    """The work: method, precision, sequence length and the global batch (sequences per step)."""

    method: Method = "pretrain"
    dtype: ComputeDtype = Field(default="bf16", description="GEMM precision (bf16 mixed, fp8 linears …)")
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH, description="sequences per optimizer step")
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=DEFAULT_LORA_RANK, ge=0, le=MAX_LORA_RANK)
    lora_targets: LoraTargets = "all"
    allow_long_seq: bool = Field(default=False, description="allow seq_len beyond the model's positions")
    optimizer_in_backward: bool = Field(
        default=False, description="optimizer step fused into backward: each gradient is freed once applied"
    )
    kernel_launch: KernelLaunch = Field(
        default="eager",
        description="eager PyTorch blocks (HF, PEFT, torchtune) or fused kernels (Megatron-Core/Transformer "
        "Engine): how many kernels the host issues per layer (core.training.step)",
    )

    @property
    def is_adapter(self) -> bool:
        return self.method in ("lora", "qlora")


class TrainingLayout(FrozenModel):
    """How the job is spread over GPUs. ``dp`` counts data-parallel (or FSDP-shard) replicas;
    expert parallelism ``ep`` lives inside ``dp·cp`` as in Megatron-Core."""

    tp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    dp: int = Field(default=1, ge=1, le=MAX_GPU_COUNT)
    cp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    ep: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    zero_stage: int = Field(default=0, ge=0, le=3, description="0 DDP, 1/2/3 ZeRO; FSDP full shard = 3")
    micro_batch: int = Field(
        default=1, ge=1, le=MAX_GLOBAL_BATCH, description="sequences per GPU per forward/backward"
    )
    checkpointing: Checkpointing = "none"
    cpu_offload: bool = Field(default=False, description="optimizer states (and master weights) in host RAM")
    activation_offload: bool = Field(default=False, description="checkpointed activations kept in host RAM")
    virtual_stages: int = Field(
        default=1, ge=1, le=MAX_LAYERS, description="interleaved pipeline: model chunks per PP rank"
    )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def label(self) -> str:
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        parts += [f"cp{self.cp}"] if self.cp > 1 else []
        parts += [f"ep{self.ep}"] if self.ep > 1 else []
        parts += [f"v{self.virtual_stages}"] if self.virtual_stages > 1 else []
        parts += [f"zero{self.zero_stage}", f"mb{self.micro_batch}", f"ckpt-{self.checkpointing}"]
        parts += ["offload"] if self.cpu_offload else []
        return " ".join(parts + (["act-offload"] if self.activation_offload else []))


def interleaved_chunks(model: ModelSpec, pp: int) -> int:
    """Model chunks per PP rank of an interleaved 1F1B schedule (Narayanan et al. 2021 §2.2) with
    about :data:`LAYERS_PER_CHUNK` layers each; 1 (plain 1F1B) without pipeline parallelism. The
    bubble shrinks to (p − 1)/(v·m) at the price of v× more point-to-point sends."""
    if pp <= 1:
        return 1
    return max(1, round(model.num_layers / pp / LAYERS_PER_CHUNK))


def micro_batches_per_step(job: TrainingJob, layout: TrainingLayout) -> int:
    """Micro-batches each pipeline runs per optimizer step (gradient accumulation × PP micro-batches)."""
    per_replica = layout.micro_batch * layout.dp
    if job.global_batch % per_replica:
        raise UserInputError(
            f"global batch {job.global_batch} is not divisible by micro-batch {layout.micro_batch} × dp {layout.dp}",
            hint=f"use a multiple of {per_replica}",
        )
    return job.global_batch // per_replica


def check_layout(model: ModelSpec, job: TrainingJob, layout: TrainingLayout) -> None:
    """Raise a one-line UserInputError when ``layout`` cannot run ``job`` on ``model``."""
    micro_batches_per_step(job, layout)
    heads = model.num_attention_heads
    if heads is not None and heads % layout.tp:
        raise UserInputError(f"tp {layout.tp} does not divide the {heads} attention heads of {model.id}")
    experts = model.moe.num_experts if model.moe else 1
    if layout.ep > 1 and experts % layout.ep:
        raise UserInputError(f"ep {layout.ep} does not divide the {experts} experts of {model.id}")
    if layout.ep > layout.tp * layout.dp * layout.cp:
        span = layout.tp * layout.dp * layout.cp
        raise UserInputError(f"ep {layout.ep} exceeds tp × dp × cp = {span} (experts live on those ranks)")
    if model.num_layers < layout.pp:
        raise UserInputError(f"pp {layout.pp} exceeds the {model.num_layers} layers of {model.id}")
    limit = model.max_position_embeddings
    if limit is not None and job.seq_len > limit and not job.allow_long_seq:
        raise UserInputError(
            f"seq_len {job.seq_len} is longer than the {limit} positions of {model.id}",
            hint="shorten seq_len; to extend the context on purpose (RoPE scaling) set allow_long_seq: true "
            "(train-fit --allow-long-seq, training.allow_long_seq in a scenario)",
        )
    if job.seq_len % layout.cp:
        raise UserInputError(f"cp {layout.cp} does not divide seq_len {job.seq_len}")

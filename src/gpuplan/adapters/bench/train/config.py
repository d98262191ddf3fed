"""What one ``gpuplan bench train`` run measures, and one batch size's result."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.frozen import FrozenModel

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class TrainBenchConfig(FrozenModel):
    """Model, batch sizes, sequence length, method; ``dtype`` None = bf16 on CUDA, fp32 on CPU."""

    model: str
    batch_sizes: tuple[int, ...] = Field(min_length=1)
    seq_len: int = Field(ge=1, le=1_048_576)
    method: Literal["full", "lora"] = "full"
    device: Literal["auto", "cuda", "cpu"] = "auto"
    dtype: Literal["fp32", "bf16", "fp16"] | None = None
    warmup_steps: int = Field(default=2, ge=0, le=100)
    steps: int = Field(default=5, ge=1, le=1000)
    lora_rank: int = Field(default=16, ge=1, le=1024)
    learning_rate: float = Field(default=1e-4, gt=0)
    gradient_checkpointing: bool = False
    seed: int = 0


class TrainResult(FrozenModel):
    """One batch size: median step time and rates, peak memory; or OOM / error, never a crash."""

    kind: Literal["train_step"] = "train_step"
    name: str
    status: Literal["ok", "oom", "error"]
    batch_size: int
    seq_len: int
    method: str
    dtype: str
    value: float | None = Field(default=None, description="median step time, s")
    unit: str = "s"
    step_s: list[float] = Field(default_factory=list)
    tokens_per_s: float | None = None
    model_flops_per_step: float | None = None
    achieved_tflops: float | None = None
    peak_memory_bytes: int | None = None
    reason: str | None = None

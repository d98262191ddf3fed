"""What one ``gpuplan bench gpu`` run measures, and the shape of one measurement."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gpuplan.core.frozen import FrozenModel

GEMM_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
MIB = 1 << 20
CUDA_GEMM_SIZE = 8192
"""8192³ GEMMs fill every current data-centre GPU (≥ 64 output tiles per SM at 128×128 tiles)."""
CPU_GEMM_SIZE = 512
CUDA_COPY_BYTES = 1024 * MIB
"""1 GiB per buffer: far beyond any L2, so device copies run at DRAM speed."""
CPU_COPY_BYTES = 64 * MIB
ALLREDUCE_BYTES = 256 * MIB
"""Where NCCL's bus bandwidth has plateaued (nccl-tests reach it from ~128 MiB)."""

Kind = Literal["gemm", "copy", "allreduce"]
Status = Literal["ok", "skipped", "error"]


class GpuBenchConfig(FrozenModel):
    """Sizes and repetitions; ``None`` picks the device's default (large on CUDA, small on CPU)."""

    device: Literal["auto", "cuda", "cpu"] = "auto"
    dtypes: tuple[str, ...] = GEMM_DTYPES
    gemm_size: int | None = Field(default=None, ge=16, le=65536)
    copy_bytes: int | None = Field(default=None, ge=4096)
    allreduce_bytes: int = Field(default=ALLREDUCE_BYTES, ge=4096)
    allreduce_ranks: int | None = Field(default=None, ge=1, le=64, description="default: visible GPUs")
    allreduce_backend: Literal["nccl", "gloo"] = "nccl"
    warmup: int = Field(default=3, ge=0, le=1000)
    repeats: int = Field(default=10, ge=1, le=10000)
    min_repeat_s: float = Field(default=0.01, ge=0, description="each timed repeat loops the op this long")
    seed: int = 0
    skip: tuple[str, ...] = Field(default=(), description="gemm, copy, h2d, d2h, allreduce")


class Measurement(FrozenModel):
    """One result, as stored: the median of ``repeats`` timings and its rate; or why it was skipped."""

    kind: Kind
    name: str
    status: Status
    value: float | None = None
    unit: str
    dtype: str | None = None
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    repeats: int = 0
    iters_per_repeat: int = 1
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None

    def row(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

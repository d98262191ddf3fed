"""The validated input and output objects of ``recommend`` (shared by CLI, web and scenario files)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec

Objective = Literal["cost", "latency", "throughput"]


class Sla(FrozenModel):
    """Latency limits a plan must meet: steady-state means (``ttft_ms``, ``tpot_ms``) and/or P99s,
    which are sized with the serving simulator (see docs/metrics.md)."""

    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=600_000)
    ttft_p99_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_p99_ms: float | None = Field(default=None, gt=0, le=600_000)

    @property
    def has_percentiles(self) -> bool:
        return self.ttft_p99_ms is not None or self.tpot_p99_ms is not None


class ServingTarget(FrozenModel):
    """The load: a request rate (open loop) or a number of requests in flight (closed loop)."""

    input_tokens: int = Field(ge=1, le=10_000_000)
    output_tokens: int = Field(ge=1, le=10_000_000)
    rate_rps: float | None = Field(default=None, gt=0, le=1_000_000)
    concurrency: int | None = Field(default=None, ge=1, le=10_000_000)

    @model_validator(mode="after")
    def _one_load(self) -> ServingTarget:
        if (self.rate_rps is None) == (self.concurrency is None):
            raise ValueError("give exactly one of rate_rps (requests/s) or concurrency (requests in flight)")
        return self


class SearchSpace(FrozenModel):
    """What the search may choose from."""

    weight_dtypes: tuple[str, ...] = ("bf16", "fp8", "int4")
    max_gpus: int = Field(default=64, ge=1, le=4096)
    tp_options: tuple[int, ...] = (1, 2, 4, 8)
    pp_options: tuple[int, ...] = (1, 2, 4, 8)
    engine: str = "vllm"
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    headroom: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description="run replicas at most at this share of their SLA-limited throughput",
    )
    p99_gpu_types: int = Field(
        default=6,
        ge=1,
        le=64,
        description="P99 limits: GPU types re-sized by simulation, cheapest analytic plan first (about 1 s of "
        "simulation per plan keeps a whole-catalog P99 recommend near 10 s)",
    )


class GpuOffer(FrozenModel):
    """A GPU and what one GPU-hour of it costs (resolved from the catalog by the caller)."""

    gpu: GpuSpec
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    price_source: str = ""
    price_kind: str = Field(
        default="on_demand", description="catalog price kind: on_demand, spot, reserved_1y …"
    )
    purchase_usd: float | None = Field(default=None, gt=0)


class MemoryBreakdownGib(FrozenModel):
    weights: float
    kv_cache: float
    activation: float
    overhead: float
    total: float
    capacity: float


class Plan(FrozenModel):
    """One ranked answer: the JSON contract of ``recommend --format json`` (docs/recommend.md)."""

    gpu: str
    count: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    concurrency_per_replica: float
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    usd_per_hour: float | None
    usd_per_month: float | None
    usd_per_million_output_tokens: float | None
    memory_per_gpu_gib: float
    memory_breakdown_gib: MemoryBreakdownGib
    bound: str
    price_source: str
    calibrated: bool = Field(description="the GPU family's efficiency factors were fitted on measurements")
    sized_on: Literal["mean", "p99"] = Field(
        default="mean", description="replicas sized on steady-state means (with headroom) or simulated P99s"
    )
    ttft_p99_ms: float | None = Field(default=None, description="simulated P99 TTFT at the target load")
    tpot_p99_ms: float | None = Field(default=None, description="simulated P99 TPOT at the target load")
    p99_capacity_rps_per_replica: float | None = Field(
        default=None, description="highest Poisson rate one replica sustains under the P99 limits"
    )


class Rejection(FrozenModel):
    """Why a GPU type produced no plan, in words and numbers."""

    gpu: str
    reason: str
    kind: Literal["memory", "latency", "count", "budget", "price", "layout", "cost"]


class Recommendation(FrozenModel):
    model: str
    objective: Objective
    plans: list[Plan]
    rejected: list[Rejection]
    explanation: list[str]
    assumptions: list[str]

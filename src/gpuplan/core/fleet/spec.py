"""The fleet file: workload classes, allowed GPU types and MIG slices, owned inventory, budget.

A fleet is several **classes** of requests (each: model, share of the total rate or its own rate,
prompt/answer lengths, SLA) plus optional training / fine-tuning jobs, served by **pools** of one
GPU type (or one MIG slice type) each. Pure data: ids are resolved against the catalog by the
fleet use case (:mod:`gpuplan.usecases.fleet`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidatorFunctionWrapHandler, field_validator, model_validator

from gpuplan.core.dtypes import get_dtype
from gpuplan.core.frozen import FiniteModel
from gpuplan.core.sla import MEAN_LIMITS, Sla, refuse_unchecked
from gpuplan.core.workload import MAX_TOKENS, MAX_WRITTEN_RATE_RPS

SHARE_TOLERANCE = 1e-6
"""Shares must sum to 1 within this (floating-point input such as 0.95 + 0.05)."""
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""RFC 1123 label (Kubernetes object names are built from class names)."""
CLASS_LIMITS = (*MEAN_LIMITS, "ttft_p99_ms", "tpot_p99_ms")
"""The ``sla:`` keys a class reads: the means it is sized on, and the TTFT/TPOT P99s, refused with a
pointer to ``recommend``, which sizes on them; ``e2e_p99_ms`` nothing here checks, an unknown key."""


class WorkloadClass(FiniteModel):
    """One kind of request: short chat, long report, ..."""

    name: str = Field(pattern=DNS_LABEL, max_length=40)
    model: str
    share: float | None = Field(default=None, gt=0, le=1, description="share of total_rate_rps")
    rate_rps: float | None = Field(default=None, gt=0, le=MAX_WRITTEN_RATE_RPS)
    input_tokens: int = Field(ge=1, le=MAX_TOKENS)
    output_tokens: int = Field(ge=1, le=MAX_TOKENS)
    sla: Sla = Sla()
    dtypes: tuple[str, ...] = ("bf16", "fp8", "int4")
    checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="pre-quantised weights per weight dtype, e.g. {int4: Qwen/Qwen2.5-7B-Instruct-AWQ}: "
        "what `k8s render` loads when the pool's plan uses that dtype",
    )

    @field_validator("sla", mode="wrap")
    @classmethod
    def _limits_a_class_reads(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Sla:
        return refuse_unchecked(value, handler, CLASS_LIMITS)

    @model_validator(mode="after")
    def _one_load(self) -> WorkloadClass:
        if (self.share is None) == (self.rate_rps is None):
            raise ValueError(f"class {self.name}: give exactly one of share or rate_rps")
        if self.sla.has_percentiles:
            raise ValueError(
                f"class {self.name}: fleets are sized on mean TTFT/TPOT (sla: ttft_ms, tpot_ms); P99 limits are "
                "not supported here (size one class on P99s with gpuplan recommend --ttft-p99-ms/--tpot-p99-ms)"
            )
        for dtype in (*self.dtypes, *self.checkpoints):
            get_dtype(dtype)  # unknown names fail here, naming the nearest, not later as "no layout"
        return self


class TrainingJobSpec(FiniteModel):
    """A training / fine-tuning job with a deadline, planned with ``gpuplan.core.training``."""

    name: str = Field(pattern=DNS_LABEL, max_length=40)
    model: str
    method: Literal["pretrain", "full_ft", "lora", "qlora"] = "lora"
    tokens: float = Field(gt=0)
    seq_len: int = Field(ge=1)
    global_batch: int = Field(default=64, ge=1)
    deadline_hours: float | None = Field(default=None, gt=0)
    runs_per_month: float = Field(default=1.0, gt=0)


class InventoryItem(FiniteModel):
    """GPUs (or MIG slices) already owned: they cost ``owned_usd_per_gpu_hour``, not the list price."""

    gpu: str = Field(description="catalog id, alias or GPU Feature Discovery product label")
    mig_profile: str | None = None
    count: int = Field(ge=0, le=1_000_000)


class FleetSpec(FiniteModel):
    """The whole fleet document (docs/deploy.md)."""

    name: str = Field(default="fleet", pattern=DNS_LABEL, max_length=40)
    engine: Literal["vllm", "sglang", "tgi"] = "vllm"
    total_rate_rps: float | None = Field(default=None, gt=0, le=1_000_000)
    classes: tuple[WorkloadClass, ...] = Field(min_length=1, max_length=32)
    gpus: tuple[str, ...] = Field(min_length=1, description="GPU types pools may use")
    mig_profiles: tuple[str, ...] = Field(
        default=(), description="MIG slices pools may use, as GPU/profile, e.g. A100-80GB-SXM/1g.10gb"
    )
    inventory: tuple[InventoryItem, ...] = ()
    owned_usd_per_gpu_hour: float = Field(
        default=0.0, ge=0, description="cost counted per owned GPU-hour (0 = sunk cost)"
    )
    budget_usd_per_month: float | None = Field(default=None, gt=0)
    price_kind: Literal["on_demand", "spot", "reserved_1y", "reserved_3y"] = "on_demand"
    price_provider: str | None = Field(
        default=None, description="price every GPU at this provider's catalog quote (e.g. AWS)"
    )
    max_gpus_per_pool: int = Field(default=64, ge=1, le=4096)
    headroom: float = Field(default=0.85, gt=0, le=1)
    training: tuple[TrainingJobSpec, ...] = ()

    @model_validator(mode="after")
    def _loads(self) -> FleetSpec:
        names = [c.name for c in self.classes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"class names must be unique: {', '.join(dupes)}")
        shared = [c for c in self.classes if c.share is not None]
        if shared and len(shared) != len(self.classes):
            raise ValueError("give every class a share, or every class a rate_rps, not a mix")
        if shared:
            if self.total_rate_rps is None:
                raise ValueError("classes given by share need total_rate_rps")
            total = math.fsum(c.share or 0.0 for c in shared)
            if abs(total - 1.0) > SHARE_TOLERANCE:
                parts = ", ".join(f"{c.name} {c.share:g}" for c in shared)
                raise ValueError(f"class shares sum to {total:g}, not 1 ({parts})")
        return self

    def rate_of(self, cls: WorkloadClass) -> float:
        """Requests/s of one class."""
        if cls.rate_rps is not None:
            return cls.rate_rps
        return (cls.share or 0.0) * (self.total_rate_rps or 0.0)

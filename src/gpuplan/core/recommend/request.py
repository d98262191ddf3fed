"""The validated input and output objects of ``recommend`` (shared by CLI, web and scenario files)."""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import (
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from gpuplan.core.calibration.narrowing import NarrowWith
from gpuplan.core.calibration.uncertainty import IntervalSource
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.perf.kv_transfer import KvTransport
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import InferenceMemory
from gpuplan.core.perf.speculative import Speculative
from gpuplan.core.pricing import PriceBasis, PriceQuote
from gpuplan.core.recommend.plan_keys import PlanLayoutKeys
from gpuplan.core.sla import Sla
from gpuplan.core.units import GIB
from gpuplan.core.workload import Workload

Objective = Literal["cost", "latency", "throughput"]
LayoutKind = Literal["aggregated", "disaggregated"]
"""A plan's kind: replicas that prefill and decode together, or prefill and decode pools apart."""
LAYOUT_KINDS: tuple[LayoutKind, ...] = ("aggregated", "disaggregated")


class SearchSpace(FrozenModel):
    """What the search may choose from."""

    weight_dtypes: tuple[str, ...] = ("bf16", "fp8", "int4")
    max_gpus: int = Field(default=64, ge=1, le=4096)
    tp_options: tuple[int, ...] = (1, 2, 4, 8)
    pp_options: tuple[int, ...] = (1, 2, 4, 8)
    engine: str = "vllm"
    engine_version: str | None = Field(
        default=None, description="release of every layout's engine (None: its own)"
    )
    speculative: Speculative | None = Field(default=None, description="speculative decoding of every layout")
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    headroom: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description="run replicas at most at this share of their SLA-limited throughput",
    )
    layout_kinds: tuple[LayoutKind, ...] = Field(
        default=LAYOUT_KINDS,
        min_length=1,
        description="plan kinds searched; disaggregated only where the engine has the mode (rate targets)",
    )
    mixed_pools: bool = Field(
        default=False,
        description="disaggregated plans may put prefill and decode on different GPU types (of one vendor)",
    )
    kv_transport: KvTransport = Field(
        default_factory=KvTransport,
        description="how a disaggregated plan's prefill hands the KV cache to decode",
    )
    p99_gpu_types: int = Field(
        default=6,
        ge=1,
        le=64,
        description="kept for compatibility, no longer limits P99 sizing: every GPU type and layout is sized on "
        "the tail model and the leaders are confirmed by simulation (core/recommend/tail.py)",
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
    price_quote: PriceQuote | None = Field(default=None, description="the quote usd_per_gpu_hour came from")
    price_missing: str = Field(
        default="", description="why the price basis gives this GPU no price (it is then not ranked)"
    )


class MemoryBreakdownGib(FrozenModel):
    weights: float
    kv_cache: float
    activation: float
    overhead: float
    total: float
    capacity: float

    @classmethod
    def of(cls, mem: InferenceMemory) -> MemoryBreakdownGib:
        """One GPU's memory at start-up, in GiB: the KV cache is the whole pool the engine allocates."""
        fixed = mem.weights_bytes + mem.activation_bytes + mem.overhead_bytes
        return cls(
            weights=mem.weights_bytes / GIB,
            kv_cache=mem.kv_pool_bytes / GIB,
            activation=mem.activation_bytes / GIB,
            overhead=mem.overhead_bytes / GIB,
            total=(fixed + mem.kv_pool_bytes) / GIB,
            capacity=mem.usable_bytes / GIB,
        )


def memory_in_use_gib(mem: InferenceMemory, *, running: float, context_tokens: int) -> float:
    """One GPU's memory with ``running`` requests of ``context_tokens`` holding KV (at most the pool)."""
    used_kv = min(running * context_tokens * mem.kv_bytes_per_token, mem.kv_pool_bytes)
    return (mem.weights_bytes + mem.activation_bytes + mem.overhead_bytes + used_kv) / GIB


class PoolPlan(FrozenModel):
    """One pool of a disaggregated plan: ``workers`` engine instances of ``tp`` x ``pp`` GPUs each
    (``ep``: their expert-parallel degree), on one GPU type."""

    gpu: str
    count: int = Field(ge=1, description="GPUs of the pool: workers x tp x pp")
    tp: int = Field(ge=1)
    pp: int = Field(ge=1)
    ep: int = Field(ge=1)
    attention_dp: int = Field(default=1, ge=1, description="attention data-parallel ranks of one worker")
    workers: int = Field(ge=1)
    weight_dtype: str
    usd_per_hour: float | None = Field(description="the pool's GPUs at the plan's price basis")
    busy_share: float = Field(
        ge=0,
        description="prefill: share of each worker's time spent on prompts; decode: requests running per "
        "worker over its capacity",
    )

    @model_validator(mode="after")
    def _count_is_all_gpus(self) -> PoolPlan:
        if self.count != self.workers * self.tp * self.pp * self.attention_dp:
            raise ValueError(
                f"count={self.count} is not workers x tp x pp x attention_dp = "
                f"{self.workers} x {self.tp} x {self.pp} x {self.attention_dp}"
            )
        return self

    @classmethod
    def of(cls, gpu: str, layout: Layout, *, usd_per_gpu_hour: float | None, busy_share: float) -> PoolPlan:
        """The pool of ``layout`` (its replicas are the workers) on ``gpu``."""
        per_hour = usd_per_gpu_hour * layout.num_gpus if usd_per_gpu_hour else None
        return cls(
            gpu=gpu,
            count=layout.num_gpus,
            tp=layout.tp,
            pp=layout.pp,
            ep=layout.ep,
            attention_dp=layout.attention_dp,
            workers=layout.replicas,
            weight_dtype=layout.weight_dtype.name,
            usd_per_hour=per_hour,
            busy_share=busy_share,
        )

    def to_layout(self, like: Layout) -> Layout:
        """This pool's layout, with ``like``'s engine, version and KV dtype."""
        pool = {
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "attention_dp": self.attention_dp,
            "replicas": self.workers,
        }
        return Layout.model_validate({**like.model_dump(), **pool, "weight_dtype": self.weight_dtype})


class PlanFigures(FrozenModel):
    """One end of a plan's intervals (``Plan.low`` / ``Plan.high``), same units as the plan's figures
    (null where the figure is not finite); a P99 is null when the plan has none, or (``high``) when
    the slow end of the capacity interval puts the load past the replica's capacity (unbounded)."""

    ttft_ms: float | None
    tpot_ms: float | None
    output_tokens_per_s: float | None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None


class PlanInterval(FrozenModel):
    """What a plan's intervals are made of: their level and, per figure, the error-model group read.
    ``capacity``: the throughput group whose interval is carried through the queue to the P99s
    (P99-sized plans only)."""

    level: float
    sources: dict[str, IntervalSource]
    capacity: IntervalSource | None = None


class Plan(FrozenModel):
    """One ranked answer: the JSON contract of ``recommend --format json`` (docs/json.md)."""

    # The docstring is the schema's description (OpenAPI), so the rest is said here: a plan holds the
    # Layout the search built (engine included) and is written with it as the flat keys of
    # PlanLayoutKeys right after ``gpu``; those keys are read back too, so the JSON of earlier
    # versions still validates (``gpuplan k8s render`` reads recommend files).
    gpu: str
    layout: Layout
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
    price_quote: PriceQuote | None = Field(
        default=None, description="the quote the plan is priced from (provider, kind, date, link)"
    )
    calibrated: bool = Field(description="the GPU family's efficiency factors were fitted on measurements")
    sized_on: Literal["mean", "p99"] = Field(
        default="mean", description="replicas sized on steady-state means (with headroom) or simulated P99s"
    )
    ttft_p99_ms: float | None = Field(
        default=None, description="P99 TTFT at the target load (see p99_source)"
    )
    tpot_p99_ms: float | None = Field(
        default=None, description="P99 TPOT at the target load (see p99_source)"
    )
    p99_capacity_rps_per_replica: float | None = Field(
        default=None, description="highest Poisson rate one replica sustains under the P99 limits"
    )
    p99_source: Literal["simulator", "tail model"] | None = Field(
        default=None,
        description="where the P99s and the replica count come from: a serving-simulator run at the target "
        "load (confirmed plans) or the analytic tail model alone; null when sized on means",
    )
    count_at_point_estimate: int | None = Field(
        default=None,
        description="GPUs this layout needs at the point estimate (recommend --confidence only; count is at "
        "the confidence)",
    )
    p99_pools: str | None = Field(
        default=None,
        description="disaggregated plans sized on P99: which pool the simulator grew from the mean-sized "
        "plan and why, or that the mean-sized pools held",
    )
    low: PlanFigures | None = Field(default=None, description="low ends of the intervals (see interval)")
    high: PlanFigures | None = Field(default=None, description="high ends of the intervals (see interval)")
    interval: PlanInterval | None = Field(
        default=None, description="the intervals' level and the error-model groups they read"
    )
    narrow_with: NarrowWith | None = Field(
        default=None,
        description="a GPU without measurements: the one benchmark that would narrow its intervals most",
    )
    layout_kind: LayoutKind = Field(
        default="aggregated",
        description="aggregated replicas, or disaggregated prefill and decode pools (then gpu and the flat "
        "layout keys tp/pp/replicas are the decode pool's, count is both pools' GPUs)",
    )
    prefill: PoolPlan | None = Field(default=None, description="the prefill pool (disaggregated plans)")
    decode: PoolPlan | None = Field(default=None, description="the decode pool (disaggregated plans)")
    kv_transfer_ms: float | None = Field(
        default=None, description="exposed KV-cache transfer of one prompt, prefill to decode (disaggregated)"
    )
    kv_transport: KvTransport | None = Field(
        default=None, description="the link the KV cache was priced on (disaggregated plans)"
    )
    prefill_share: float | None = Field(
        default=None,
        description="share of an aggregated replica's GPU time its prompts take at the target (rate targets)",
    )

    @model_validator(mode="before")
    @classmethod
    def _layout_from_flat_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "layout" in data:
            return data
        names = PlanLayoutKeys.model_fields
        flat = {k: v for k, v in data.items() if k in names}
        prefill = data.get("prefill")
        if isinstance(prefill, dict) and isinstance(flat.get("count"), int):
            flat["count"] -= prefill.get("count", 0)  # count is both pools'; the keys are the decode pool's
        keys = PlanLayoutKeys.model_validate(flat)
        return {**{k: v for k, v in data.items() if k not in names}, "layout": keys.to_layout()}

    @model_serializer(mode="wrap")
    def _layout_as_flat_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields = handler(self)
        del fields["layout"]
        keys = PlanLayoutKeys.of(self.layout).model_dump()
        keys["count"] = self.num_gpus
        return {"gpu": fields.pop("gpu"), **keys, **fields}

    @property
    def gpu_types(self) -> str:
        """The GPU types of the plan: ``gpu``, or ``H100-SXM+H200-SXM`` for pools on two (prefill first);
        the search lists the best plan of each."""
        pre = self.prefill
        return self.gpu if pre is None or pre.gpu == self.gpu else f"{pre.gpu}+{self.gpu}"

    @property
    def num_gpus(self) -> int:
        """Every GPU of the plan: its replicas, or its decode and prefill pools."""
        return self.layout.num_gpus + (self.prefill.count if self.prefill is not None else 0)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The fields' schema with ``layout`` spelt as its flat keys, in validation and serialization
        alike: what the serializer writes (its ``dict`` return type would say nothing of the keys)."""
        fields_only = cast(CoreSchema, {k: v for k, v in schema.items() if k != "serialization"})
        json_schema = handler(fields_only)
        plan = handler.resolve_ref_schema(json_schema)
        keys = handler.resolve_ref_schema(handler(PlanLayoutKeys.__pydantic_core_schema__))
        properties: dict[str, Any] = {}
        for name, prop in plan["properties"].items():
            properties.update(keys["properties"] if name == "layout" else {name: prop})
        plan["properties"] = properties
        plan["required"] = [
            k for name in plan["required"] for k in (keys["required"] if name == "layout" else [name])
        ]
        return json_schema


class Rejection(FrozenModel):
    """Why a GPU type produced no plan, in words and numbers."""

    gpu: str
    reason: str
    kind: Literal["memory", "latency", "count", "budget", "price", "layout", "cost"]


class Recommendation(FrozenModel):
    """Ranked plans for one model and workload. ``workload``: the request it answers (lengths and
    load), so a plan file carries what ``k8s render`` needs; ``sla``: the latency limits the plans meet,
    so ``tco --load-growth`` can re-plan; each None in files written before it was."""

    model: str
    workload: Workload | None = None
    sla: Sla | None = Field(default=None, description="the latency limits every plan of this answer meets")
    objective: Objective
    price_basis: PriceBasis | None = Field(
        default=None, description="the providers every plan of this answer is priced from"
    )
    confidence: float | None = Field(
        default=None,
        description="the quantile of the error model each plan is sized at (null: the point estimate)",
    )
    plans: list[Plan]
    rejected: list[Rejection]
    explanation: list[str]
    assumptions: list[str]

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

from gpuplan.core.calibration.uncertainty import IntervalSource
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.speculative import Speculative
from gpuplan.core.pricing import PriceBasis, PriceQuote
from gpuplan.core.workload import Workload

Objective = Literal["cost", "latency", "throughput"]


class SearchSpace(FrozenModel):
    """What the search may choose from."""

    weight_dtypes: tuple[str, ...] = ("bf16", "fp8", "int4")
    max_gpus: int = Field(default=64, ge=1, le=4096)
    tp_options: tuple[int, ...] = (1, 2, 4, 8)
    pp_options: tuple[int, ...] = (1, 2, 4, 8)
    engine: str = "vllm"
    speculative: Speculative | None = Field(default=None, description="speculative decoding of every layout")
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


class PlanLayoutKeys(FrozenModel):
    """A plan's layout as the flat keys of the JSON contract (docs/json.md), in their order: GPUs in
    all, TP and PP of a replica, replicas, the weight dtype and the KV dtype the layout resolves to."""

    count: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    kv_dtype: str

    @model_validator(mode="after")
    def _count_is_all_gpus(self) -> PlanLayoutKeys:
        if self.count != self.tp * self.pp * self.replicas:
            raise ValueError(
                f"count={self.count} is not tp x pp x replicas = {self.tp} x {self.pp} x {self.replicas}"
            )
        return self

    @classmethod
    def of(cls, layout: Layout) -> PlanLayoutKeys:
        """The keys of ``layout``: its fields of the same names (dtypes by name), all its GPUs, the
        name of its resolved KV dtype."""
        same = layout.model_dump(include={"tp", "pp", "replicas", "weight_dtype"})
        return cls(count=layout.num_gpus, kv_dtype=layout.resolved_kv_dtype.name, **same)

    def to_layout(self) -> Layout:
        """The layout these keys describe (its engine is not in them: the default)."""
        return Layout(**self.model_dump(exclude={"count"}))


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
    low: PlanFigures | None = Field(default=None, description="low ends of the intervals (see interval)")
    high: PlanFigures | None = Field(default=None, description="high ends of the intervals (see interval)")
    interval: PlanInterval | None = Field(
        default=None, description="the intervals' level and the error-model groups they read"
    )

    @model_validator(mode="before")
    @classmethod
    def _layout_from_flat_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "layout" in data:
            return data
        names = PlanLayoutKeys.model_fields
        keys = PlanLayoutKeys.model_validate({k: v for k, v in data.items() if k in names})
        return {**{k: v for k, v in data.items() if k not in names}, "layout": keys.to_layout()}

    @model_serializer(mode="wrap")
    def _layout_as_flat_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields = handler(self)
        del fields["layout"]
        return {"gpu": fields.pop("gpu"), **PlanLayoutKeys.of(self.layout).model_dump(), **fields}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The fields' schema with ``layout`` spelt as its flat keys, in validation and serialization
        alike: what the serializer writes (its ``dict`` return type would say nothing of the keys)."""
        fields_only = cast(CoreSchema, {k: v for k, v in schema.items() if k != "serialization"})
        json_schema = handler(fields_only)
        plan = handler.resolve_ref_schema(json_schema)
        keys = PlanLayoutKeys.model_json_schema()
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
    load), so a plan file carries what ``k8s render`` needs; None in files written before it was."""

    model: str
    workload: Workload | None = None
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

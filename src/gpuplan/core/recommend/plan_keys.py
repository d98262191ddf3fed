"""A plan's layout as the flat keys of ``recommend``'s JSON contract (docs/json.md), written and read back."""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.speculative import Speculative


class PlanLayoutKeys(FrozenModel):
    """A plan's layout as the flat keys of the JSON contract (docs/json.md), in their order: GPUs in
    all, TP and PP of a replica, replicas, the weight dtype and the KV dtype the layout resolves to,
    then the expert-parallel and attention data-parallel degrees (1 in plans written before them) and
    the speculative decoding (null when off, and in plans written before it), and the engine and its
    release (``vllm`` and null in plans written before them)."""

    count: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    ep: int = 1
    attention_dp: int = 1
    speculative: Speculative | None = Field(
        default=None, description="speculative decoding of the plan (core/perf/speculative.py); null: off"
    )
    engine: str = "vllm"
    engine_version: str | None = None

    @model_validator(mode="after")
    def _count_is_all_gpus(self) -> PlanLayoutKeys:
        if self.count != self.tp * self.pp * self.attention_dp * self.replicas:
            dp = f" x attention_dp {self.attention_dp}" if self.attention_dp > 1 else ""
            raise ValueError(
                f"count={self.count} is not tp x pp x replicas = {self.tp} x {self.pp} x {self.replicas}{dp}"
            )
        return self

    @classmethod
    def of(cls, layout: Layout) -> PlanLayoutKeys:
        """The keys of ``layout``: its fields of the same names (dtypes by name), all its GPUs, the
        name of its resolved KV dtype."""
        same = layout.model_dump(include={"tp", "pp", "replicas", "weight_dtype", "ep", "attention_dp"})
        return cls(
            count=layout.num_gpus,
            kv_dtype=layout.resolved_kv_dtype.name,
            speculative=layout.speculative,
            engine=layout.engine.name,
            engine_version=layout.engine_version,
            **same,
        )

    def to_layout(self) -> Layout:
        """The layout these keys describe."""
        return Layout(**self.model_dump(exclude={"count"}))

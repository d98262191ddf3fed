"""A plan holds its Layout but is written, and read back, as the flat keys of the JSON contract
(docs/json.md): what ``recommend --format json`` wrote before and ``gpuplan k8s render`` reads."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.request import MemoryBreakdownGib, Plan, Recommendation

FLAT_KEYS = ["gpu", "count", "tp", "pp", "replicas", "weight_dtype", "kv_dtype", "concurrency_per_replica"]
EARLIER_PLAN: dict[str, Any] = {
    "gpu": "H100-SXM",
    "count": 4,
    "tp": 2,
    "pp": 1,
    "replicas": 2,
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
    "concurrency_per_replica": 12.5,
    "ttft_ms": 180.0,
    "tpot_ms": 21.0,
    "output_tokens_per_s": 2560.0,
    "requests_per_s": 20.0,
    "usd_per_hour": 12.0,
    "usd_per_month": 8760.0,
    "usd_per_million_output_tokens": 1.3,
    "memory_per_gpu_gib": 60.0,
    "memory_breakdown_gib": {
        "weights": 4.0,
        "kv_cache": 50.0,
        "activation": 1.0,
        "overhead": 2.0,
        "total": 57.0,
        "capacity": 79.0,
    },
    "bound": "memory",
    "price_source": "example",
    "calibrated": True,
    "sized_on": "mean",
    "ttft_p99_ms": None,
    "tpot_p99_ms": None,
    "p99_capacity_rps_per_replica": None,
}
"""One plan as ``recommend --format json`` wrote it before plans held a Layout (every key, in order)."""
WRITTEN_PLAN: dict[str, Any] = {
    **{k: v for k, v in EARLIER_PLAN.items() if k in FLAT_KEYS[:7]},
    "ep": 1,
    "attention_dp": 1,
    "speculative": None,
    "engine": "sglang",
    "engine_version": None,
    **{
        k: v
        for k, v in EARLIER_PLAN.items()
        if k in list(EARLIER_PLAN)[7 : list(EARLIER_PLAN).index("calibrated")]
    },
    "price_quote": None,
    **{
        k: v
        for k, v in EARLIER_PLAN.items()
        if k in list(EARLIER_PLAN)[list(EARLIER_PLAN).index("calibrated") :]
    },
    "p99_source": None,
    "count_at_point_estimate": None,
    "p99_pools": None,
    "low": None,
    "high": None,
    "interval": None,
    "narrow_with": None,
    "layout_kind": "aggregated",
    "prefill": None,
    "decode": None,
    "kv_transfer_ms": None,
    "kv_transport": None,
    "prefill_share": None,
}
"""The same plan as written now: ``price_quote`` (the quote it is priced from, null in a plan built
without one) after ``price_source``, ``p99_source`` (where P99s came from), then the count at the point
estimate, the intervals and the benchmark that would narrow them (``recommend --confidence``, issue
17), then the layout kind, a disaggregated plan's pools and KV link (issue 20), last; the layout keys end with
the speculative decoding (null: off) and the engine and its release (null: the engine's own factors)."""


def _plan(layout: Layout) -> Plan:
    rest = {k: v for k, v in EARLIER_PLAN.items() if k not in FLAT_KEYS[1:7]}
    rest["memory_breakdown_gib"] = MemoryBreakdownGib(**EARLIER_PLAN["memory_breakdown_gib"])
    return Plan(**{**rest, "layout": layout})


def test_a_plan_is_written_as_the_flat_keys_in_their_order() -> None:
    plan = _plan(Layout(tp=2, replicas=2, weight_dtype="fp8", engine="sglang"))
    assert plan.model_dump(mode="json") == WRITTEN_PLAN
    assert list(plan.model_dump(mode="json")) == list(WRITTEN_PLAN)  # key order, not only the keys
    assert (
        plan.model_dump_json() == Plan.model_validate({**EARLIER_PLAN, "engine": "sglang"}).model_dump_json()
    )
    assert Plan.model_validate(EARLIER_PLAN).layout.engine.name == "vllm"  # before the key: the default


def test_the_engine_and_its_release_read_back() -> None:
    written = _plan(Layout(tp=2, replicas=2, weight_dtype="fp8", engine="sglang", engine_version="0.5.2"))
    back = Plan.model_validate(written.model_dump(mode="json"))
    assert (back.layout.engine.name, back.layout.engine_version) == ("sglang", "0.5.2")


def test_kv_dtype_is_the_resolved_one() -> None:
    assert _plan(Layout(tp=2, replicas=2, weight_dtype="int4")).model_dump()["kv_dtype"] == "bf16"
    assert _plan(Layout(tp=2, replicas=2, weight_dtype="fp8")).model_dump()["kv_dtype"] == "fp8"


def test_json_of_earlier_versions_reads_back_into_a_layout() -> None:
    rec = Recommendation.model_validate(
        {
            "model": "m",
            "objective": "cost",
            "plans": [EARLIER_PLAN],
            "rejected": [],
            "explanation": [],
            "assumptions": [],
        }
    )
    layout = rec.plans[0].layout
    assert (layout.tp, layout.pp, layout.replicas, layout.num_gpus) == (2, 1, 2, 4)
    assert layout.weight_dtype.name == "fp8" and layout.resolved_kv_dtype.name == "fp8"


def test_a_count_that_is_not_tp_pp_replicas_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"count=8 is not tp x pp x replicas = 2 x 1 x 2"):
        Plan.model_validate({**EARLIER_PLAN, "count": 8})


def test_a_missing_layout_key_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        Plan.model_validate({k: v for k, v in EARLIER_PLAN.items() if k != "tp"})
    assert [e["loc"] for e in info.value.errors()] == [("tp",)]


@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_the_json_schema_names_the_flat_keys(mode: Any) -> None:
    schema = Plan.model_json_schema(mode=mode)
    assert list(schema["properties"]) == list(WRITTEN_PLAN)
    assert schema["required"][: len(FLAT_KEYS)] == FLAT_KEYS
    assert schema["properties"]["tp"] == {"title": "Tp", "type": "integer"}
    assert "$defs" not in schema or "Layout" not in schema["$defs"]

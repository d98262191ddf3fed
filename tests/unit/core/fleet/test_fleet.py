"""Fleet planner: the seed story, infeasible classes, MIG slices, inventory, budget, assignment search."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.errors import FileFormatError, InfeasibleError, UnknownNameError, UserInputError
from gpuplan.core.fleet import assign as assign_mod
from gpuplan.core.fleet.assign import Pricing, assign, fleet_cost
from gpuplan.core.fleet.planner import tier_of
from gpuplan.core.fleet.pool_units import mig_unit, parse_mig_ref, whole_gpu_unit
from gpuplan.core.fleet.sizing import PoolOption
from gpuplan.core.fleet.spec import InventoryItem
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.request import GpuOffer, MemoryBreakdownGib, Plan
from gpuplan.usecases.fleet import owned_units, parse_fleet, plan_from_spec
from gpuplan.usecases.resolve import offers

SEED_003 = """
name: seed-003
total_rate_rps: 12
gpus: [A10, A100-80GB-SXM]
classes:
  - name: chat
    model: Qwen/Qwen2.5-7B-Instruct
    share: 0.95
    input_tokens: 512
    output_tokens: 256
    sla: {ttft_ms: 1000, tpot_ms: 50}
  - name: reports
    model: Qwen/Qwen2.5-14B-Instruct
    share: 0.05
    input_tokens: 4096
    output_tokens: 1024
    sla: {ttft_ms: 3000, tpot_ms: 50}
"""


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_seed_003_mixed_a10_a100_beats_all_a100(catalog) -> None:  # type: ignore[no-untyped-def]
    plan = plan_from_spec(parse_fleet(SEED_003, origin="seed"), catalog)
    by_class = {p.workload_class: p for p in plan.pools}
    assert by_class["chat"].gpu == "A10"
    assert by_class["reports"].gpu == "A100-80GB-SXM"
    all_a100 = next(s for s in plan.single_type if s.unit == "A100-80GB-SXM")
    assert all_a100.usd_per_month is not None
    assert plan.best_single_type is not None and plan.best_single_type.unit == "A100-80GB-SXM"
    assert plan.usd_per_month < all_a100.usd_per_month
    assert plan.saving_usd_per_month == pytest.approx(all_a100.usd_per_month - plan.usd_per_month)
    assert plan.saving_share is not None and 0.0 < plan.saving_share < 0.5
    assert {t.tier for t in plan.tiers} == {"cost", "general"}
    for pool in plan.pools:
        assert 0 < pool.utilisation <= 0.85 + 1e-6
        assert pool.headroom == pytest.approx(1 - pool.utilisation)


def test_infeasible_sla_names_class_and_reason(catalog) -> None:  # type: ignore[no-untyped-def]
    text = SEED_003.replace("sla: {ttft_ms: 3000, tpot_ms: 50}", "sla: {ttft_ms: 3000, tpot_ms: 2}")
    with pytest.raises(InfeasibleError) as err:
        plan_from_spec(parse_fleet(text, origin="seed"), catalog)
    line = err.value.one_line()
    assert "class 'reports'" in line and "TPOT" in line and "A10:" in line
    assert "\n" not in line


def test_shares_must_sum_to_one() -> None:
    with pytest.raises(FileFormatError, match=r"shares sum to 0\.9, not 1") as err:
        parse_fleet(SEED_003.replace("0.95", "0.85"), origin="f.yaml")
    assert "f.yaml" in err.value.one_line()


def test_share_and_rate_mixed_and_duplicate_names() -> None:
    with pytest.raises(FileFormatError, match="not a mix"):
        parse_fleet(SEED_003.replace("share: 0.05", "rate_rps: 1"), origin="f")
    with pytest.raises(FileFormatError, match="unique"):
        parse_fleet(SEED_003.replace("name: reports", "name: chat"), origin="f")


@pytest.mark.parametrize(
    ("sla", "line"),
    [
        ("{ttft_ms: 1000, e2e_p99_ms: 9000}", "classes.0.sla.e2e_p99_ms: Extra inputs are not permitted ("),
        ('{ttft_ms: 1000, e2e_p99_ms: "x"}', "classes.0.sla.e2e_p99_ms: Extra inputs are not permitted ("),
        ("{ttft_p99_ms: 1000}", "classes.0: class chat: fleets are sized on mean TTFT/TPOT"),
    ],
)
def test_class_sla_refuses_e2e_as_unknown_and_points_p99s_to_recommend(sla: str, line: str) -> None:
    """No path sizes a class on e2e_p99_ms, so it gets no hint (recommend refuses it too); the TTFT/TPOT
    P99s are sized by recommend, which the refusal names."""
    with pytest.raises(FileFormatError) as err:
        parse_fleet(SEED_003.replace("{ttft_ms: 1000, tpot_ms: 50}", sla), origin="f")
    assert err.value.one_line().startswith(f"f: {line}"), err.value.one_line()


def test_mig_slice_is_a_fraction_of_the_gpu(catalog) -> None:  # type: ignore[no-untyped-def]
    offer = offers(catalog, ["A100-80GB-SXM"])[0]
    unit = mig_unit(offer, "1g.10gb")
    assert unit.id == "A100-80GB-SXM/1g.10gb" and unit.gpus_per_unit == pytest.approx(1 / 7)
    assert unit.offer.usd_per_gpu_hour == pytest.approx((offer.usd_per_gpu_hour or 0) / 7)
    assert unit.offer.gpu.memory_bytes == 10e9
    assert unit.offer.gpu.memory_bandwidth_bytes_per_s == pytest.approx(
        offer.gpu.memory_bandwidth_bytes_per_s / 7
    )
    assert unit.offer.gpu.dense_tflops.bf16 == pytest.approx((offer.gpu.dense_tflops.bf16 or 0) / 7)


def test_mig_profile_not_offered_is_one_line(catalog) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserInputError, match=r"'1g\.10gb' is not offered by A10 \(offers: none"):
        mig_unit(offers(catalog, ["A10"])[0], "1g.10gb")
    with pytest.raises(UserInputError, match=r"offers: 1g\.10gb, 1g\.20gb"):
        mig_unit(offers(catalog, ["A100-80GB-SXM"])[0], "9g.99gb")
    with pytest.raises(UserInputError, match="GPU/profile"):
        parse_mig_ref("A100-80GB-SXM")


def test_small_model_on_mig_slices(catalog) -> None:  # type: ignore[no-untyped-def]
    text = """
total_rate_rps: 2
gpus: [A100-80GB-SXM]
mig_profiles: [A100-80GB-SXM/1g.10gb]
classes:
  - {name: tiny, model: Qwen/Qwen2.5-0.5B-Instruct, share: 1.0, input_tokens: 256, output_tokens: 128,
     sla: {ttft_ms: 1000, tpot_ms: 100}}
"""
    plan = plan_from_spec(parse_fleet(text, origin="f"), catalog)
    (pool,) = plan.pools
    assert pool.mig_profile == "1g.10gb" and pool.tier == "cost"
    assert pool.plan.layout.tp == 1 and pool.plan.layout.pp == 1
    assert pool.physical_gpus < 1
    whole = next(s for s in plan.single_type if s.unit == "A100-80GB-SXM")
    assert whole.usd_per_month is not None and plan.usd_per_month < whole.usd_per_month


def test_owned_inventory_is_used_first(catalog) -> None:  # type: ignore[no-untyped-def]
    base = plan_from_spec(parse_fleet(SEED_003, origin="f"), catalog)
    owned_text = SEED_003 + "inventory:\n  - {gpu: NVIDIA-A100-SXM4-80GB, count: 8}\n"
    plan = plan_from_spec(parse_fleet(owned_text, origin="f"), catalog)
    assert all(p.gpu == "A100-80GB-SXM" for p in plan.pools)
    assert sum(p.owned_units for p in plan.pools) == sum(p.units for p in plan.pools)
    assert plan.usd_per_month == 0.0 < base.usd_per_month


def test_unknown_product_label_in_inventory(catalog) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnknownNameError, match="unknown GPU product label 'NVIDIA-B9000'"):
        owned_units([InventoryItem(gpu="NVIDIA-B9000", count=1)], catalog)
    with pytest.raises(UserInputError, match="not offered by A10"):
        owned_units([InventoryItem(gpu="NVIDIA-A10", mig_profile="1g.10gb", count=1)], catalog)


def test_budget_overrun_is_infeasible(catalog) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InfeasibleError, match="> budget"):
        plan_from_spec(parse_fleet(SEED_003 + "budget_usd_per_month: 1000\n", origin="f"), catalog)


def _plan(unit: str, count: int) -> Plan:
    mem = MemoryBreakdownGib(weights=1, kv_cache=1, activation=0, overhead=0, total=2, capacity=20)
    return Plan(
        gpu=unit,
        layout=Layout(replicas=count),
        concurrency_per_replica=4,
        ttft_ms=100,
        tpot_ms=20,
        output_tokens_per_s=100,
        requests_per_s=1,
        usd_per_hour=None,
        usd_per_month=None,
        usd_per_million_output_tokens=None,
        memory_per_gpu_gib=2,
        memory_breakdown_gib=mem,
        bound="memory",
        price_source="",
        calibrated=False,
    )


def _opt(cls: str, unit: str, units: int, price: float) -> PoolOption:
    return PoolOption(
        workload_class=cls,
        unit=unit,
        plan=_plan(unit, units),
        units=units,
        usd_per_unit_hour=price,
        rate_rps=1.0,
        max_rps_per_replica=2.0,
        utilisation=0.5,
    )


def test_assignment_counts_owned_units_across_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two classes both prefer the 4 owned big GPUs; only one fits them, the other goes to small GPUs."""
    choices = [
        [_opt("a", "big", 4, 3.0), _opt("a", "small", 6, 1.0)],
        [_opt("b", "big", 4, 3.0), _opt("b", "small", 5, 1.0)],
    ]
    pricing = Pricing(
        owned_units={"big": 4}, owned_usd_per_gpu_hour=0.0, gpus_per_unit={"big": 1, "small": 1}
    )
    exact = assign(choices, pricing)
    assert exact.method.startswith("exact")
    assert exact.usd_per_hour == pytest.approx(5.0)
    assert [o.unit for o in exact.options] == ["big", "small"]
    monkeypatch.setattr(assign_mod, "EXACT_LIMIT", 0)
    greedy = assign(choices, pricing)
    assert greedy.method.startswith("greedy")
    assert greedy.usd_per_hour == pytest.approx(exact.usd_per_hour)
    assert fleet_cost(greedy.options, pricing) == pytest.approx(greedy.usd_per_hour)


def test_whole_gpu_unit_is_one_gpu(catalog) -> None:  # type: ignore[no-untyped-def]
    unit = whole_gpu_unit(GpuOffer(gpu=catalog.get_gpu("A10"), usd_per_gpu_hour=1.0))
    assert unit.gpus_per_unit == 1.0 and not unit.is_mig


def test_training_job_is_planned_and_costed(catalog) -> None:  # type: ignore[no-untyped-def]
    text = SEED_003 + (
        "training:\n  - {name: weekly-lora, model: Qwen/Qwen2.5-7B-Instruct, method: lora, tokens: 5.0e+7,"
        " seq_len: 2048, deadline_hours: 12, runs_per_month: 4}\n"
    )
    plan = plan_from_spec(parse_fleet(text, origin="f"), catalog)
    (job,) = plan.training
    assert job.wall_hours <= 12 and job.usd_per_month == pytest.approx(4 * job.usd_per_run)
    assert plan.usd_per_month == pytest.approx(sum(p.usd_per_month for p in plan.pools) + job.usd_per_month)


@pytest.mark.parametrize(
    ("gpu", "mig", "tier"),
    [
        ("H100-SXM", None, "hpc"),  # full NVLink, H100-class compute
        ("B200", None, "hpc"),
        ("H800", None, "general"),  # 400 GB/s export NVLink: seed 000 puts it in the general tier
        ("H20", None, "general"),  # full NVLink but 148 BF16 TFLOPS
        ("H100-PCIe", None, "general"),  # bridged pairs, not an HGX fabric
        ("A100-80GB-SXM", None, "general"),
        ("L4", None, "cost"),  # < 40 GB
        ("A100-80GB-SXM", "1g.10gb", "cost"),  # MIG slice
    ],
)
def test_tiers_follow_seed_000(catalog, gpu: str, mig: str | None, tier: str) -> None:  # type: ignore[no-untyped-def]
    offer = offers(catalog, [gpu])[0]
    unit = mig_unit(offer, mig) if mig else whole_gpu_unit(offer)
    assert tier_of(unit) == tier

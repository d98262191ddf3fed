"""``plan_fleet``: the cheapest set of pools and routing of classes that meets every class's SLA.

1. size every class on every allowed unit (:mod:`gpuplan.core.fleet.sizing`);
2. a class with no feasible unit makes the fleet infeasible (the class and each unit's reason);
3. assign classes to units, counting owned GPUs (:mod:`gpuplan.core.fleet.assign`);
4. check the budget, then report pools, tiers, utilisation and the saving versus the cheapest
   fleet that uses a single unit type for every class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.cost import monthly_usd
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.fleet.assign import Pricing, assign, fleet_cost
from gpuplan.core.fleet.pool_units import PoolUnit
from gpuplan.core.fleet.sizing import PoolOption, SizingMiss, class_space, size_class
from gpuplan.core.fleet.spec import FleetSpec, WorkloadClass
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend.request import Plan
from gpuplan.core.workload import Workload

Tier = Literal["hpc", "general", "cost"]
HPC_FAMILIES = ("hopper", "blackwell")
"""Seed 000 §2.4: the HPC tier is H100-class; the general tier A100/H800; older GPUs or MIG slices
are the cost-optimised tier."""
HPC_MIN_SCALE_UP_BYTES_PER_S = 900e9
"""Full HGX NVLink (H100 SXM: 900 GB/s). The export H800 (400 GB/s) and bridged PCIe/NVL cards (600)
are general tier, where seed 000 §2.4 puts the H800."""
HPC_MIN_BF16_TFLOPS = 500.0
"""H100-class tensor throughput; the compute-capped H20 (148 dense BF16 TFLOPS) is general tier."""
GENERAL_MIN_MEMORY_BYTES = 40e9
"""Data-centre parts with ≥ 40 GB HBM (A100, MI300X ...) are general tier; smaller cards are cost tier."""


class FleetPool(FrozenModel):
    name: str
    workload_class: str
    model: str
    unit: str
    gpu: str
    mig_profile: str | None
    tier: Tier
    engine: str
    input_tokens: int
    output_tokens: int
    rate_rps: float
    plan: Plan
    units: int
    owned_units: int
    billable_units: int
    physical_gpus: float
    usd_per_hour: float
    usd_per_month: float
    utilisation: float
    headroom: float
    checkpoint: str | None = None
    """The class's pre-quantised weights for this pool's weight dtype (``checkpoints:``), if any."""


class TierSummary(FrozenModel):
    tier: Tier
    units: list[str]
    physical_gpus: float
    usd_per_month: float
    utilisation: float


class SingleTypeFleet(FrozenModel):
    unit: str
    usd_per_month: float | None
    reason: str = ""


class TrainingAllocation(FrozenModel):
    name: str
    model: str
    gpu: str
    gpus: int
    layout: str
    wall_hours: float
    usd_per_run: float
    runs_per_month: float
    usd_per_month: float


class FleetPlan(FrozenModel):
    name: str
    engine: str
    search: str
    price_basis: PriceBasis | None = None
    pools: list[FleetPool]
    tiers: list[TierSummary]
    training: list[TrainingAllocation]
    serving_usd_per_hour: float
    usd_per_month: float
    budget_usd_per_month: float | None
    best_single_type: SingleTypeFleet | None
    saving_usd_per_month: float | None
    saving_share: float | None
    single_type: list[SingleTypeFleet]
    notes: list[str]


def tier_of(unit: PoolUnit) -> Tier:
    if unit.is_mig or unit.parent.memory_bytes < GENERAL_MIN_MEMORY_BYTES:
        return "cost"
    gpu = unit.parent
    flagship = (
        gpu.family in HPC_FAMILIES
        and gpu.interconnect.scale_up_bytes_per_s >= HPC_MIN_SCALE_UP_BYTES_PER_S
        and (gpu.tflops("bf16") or 0.0) >= HPC_MIN_BF16_TFLOPS
    )
    return "hpc" if flagship else "general"


def _size_all(
    spec: FleetSpec, models: Mapping[str, ModelSpec], units: Sequence[PoolUnit], cal: Calibration
) -> tuple[list[list[PoolOption]], list[list[SizingMiss]]]:
    options: list[list[PoolOption]] = []
    misses: list[list[SizingMiss]] = []
    for cls in spec.classes:
        target = Workload(
            scenario="rate",
            input_tokens=cls.input_tokens,
            output_tokens=cls.output_tokens,
            rate_rps=spec.rate_of(cls),
        )
        got: list[PoolOption] = []
        missed: list[SizingMiss] = []
        for unit in units:
            space = class_space(unit, cls.dtypes, spec.engine, spec.max_gpus_per_pool, spec.headroom)
            result = size_class(cls.name, models[cls.model], unit, target, cls.sla, space, cal)
            (got if isinstance(result, PoolOption) else missed).append(result)  # type: ignore[arg-type]
        options.append(got)
        misses.append(missed)
    return options, misses


def _raise_infeasible(cls: WorkloadClass, missed: Sequence[SizingMiss]) -> None:
    reasons = [f"{m.unit}: {m.reason}" for m in missed]
    raise InfeasibleError(
        f"fleet infeasible: class {cls.name!r} ({cls.model}) cannot be served on any allowed GPU",
        nearest=reasons,
        hint="relax that class's SLA, allow larger GPUs or lower-precision weights",
    )


def plan_fleet(
    spec: FleetSpec,
    models: Mapping[str, ModelSpec],
    units: Sequence[PoolUnit],
    *,
    cal: Calibration,
    owned_units: Mapping[str, int] | None = None,
    training: Sequence[TrainingAllocation] = (),
) -> FleetPlan:
    """Plan the fleet; InfeasibleError names the class and the reason, or the budget overrun."""
    pricing = Pricing(
        owned_units=dict(owned_units or {}),
        owned_usd_per_gpu_hour=spec.owned_usd_per_gpu_hour,
        gpus_per_unit={u.id: u.gpus_per_unit for u in units},
    )
    options, misses = _size_all(spec, models, units, cal)
    for cls, got, missed in zip(spec.classes, options, misses, strict=True):
        if not got:
            _raise_infeasible(cls, missed)
    chosen = assign(options, pricing)
    training_month = sum(t.usd_per_month for t in training)
    total_month = monthly_usd(usd_per_hour=chosen.usd_per_hour) + training_month
    _check_budget(spec, total_month)
    by_unit = {u.id: u for u in units}
    pools = _pools(spec, chosen.options, by_unit, pricing)
    singles = _single_type(spec, options, misses, units, pricing)
    best_single = _cheapest_priced(singles)
    serving_month = monthly_usd(usd_per_hour=chosen.usd_per_hour)
    single_month = best_single.usd_per_month if best_single else None
    saving = single_month - serving_month if single_month else None
    return FleetPlan(
        name=spec.name,
        engine=spec.engine,
        search=chosen.method,
        pools=pools,
        tiers=_tiers(pools),
        training=list(training),
        serving_usd_per_hour=chosen.usd_per_hour,
        usd_per_month=total_month,
        budget_usd_per_month=spec.budget_usd_per_month,
        best_single_type=best_single,
        saving_usd_per_month=saving,
        saving_share=saving / single_month if saving is not None and single_month else None,
        single_type=singles,
        notes=_notes(spec, pools),
    )


def _check_budget(spec: FleetSpec, total_usd_per_month: float) -> None:
    """InfeasibleError when the cheapest fleet (serving and training) costs more than the budget."""
    if spec.budget_usd_per_month is not None and total_usd_per_month > spec.budget_usd_per_month:
        raise InfeasibleError(
            f"fleet infeasible: the cheapest fleet costs ${total_usd_per_month:,.0f}/month > budget "
            f"${spec.budget_usd_per_month:,.0f}/month",
            hint="raise the budget, relax SLAs or add owned inventory",
        )


def _cheapest_priced(singles: Sequence[SingleTypeFleet]) -> SingleTypeFleet | None:
    """The cheapest single-type fleet that has a price (None when no unit type serves every class)."""
    return min(
        (s for s in singles if s.usd_per_month is not None),
        key=lambda s: s.usd_per_month or 0.0,
        default=None,
    )


def _pools(
    spec: FleetSpec, options: Sequence[PoolOption], units: Mapping[str, PoolUnit], pricing: Pricing
) -> list[FleetPool]:
    left = dict(pricing.owned_units)
    classes = {c.name: c for c in spec.classes}
    pools = []
    for opt in options:
        unit, cls = units[opt.unit], classes[opt.workload_class]
        owned = min(opt.units, left.get(unit.id, 0))
        left[unit.id] = left.get(unit.id, 0) - owned
        per_hour = (opt.units - owned) * opt.usd_per_unit_hour + owned * (
            pricing.owned_usd_per_gpu_hour * unit.gpus_per_unit
        )
        pools.append(
            FleetPool(
                name=f"{cls.name}-{_slug(unit.id)}",
                workload_class=cls.name,
                model=cls.model,
                unit=unit.id,
                gpu=unit.parent.id,
                mig_profile=unit.mig.name if unit.mig else None,
                tier=tier_of(unit),
                engine=spec.engine,
                input_tokens=cls.input_tokens,
                output_tokens=cls.output_tokens,
                rate_rps=opt.rate_rps,
                plan=opt.plan,
                units=opt.units,
                owned_units=owned,
                billable_units=opt.units - owned,
                physical_gpus=opt.units * unit.gpus_per_unit,
                usd_per_hour=per_hour,
                usd_per_month=monthly_usd(usd_per_hour=per_hour),
                utilisation=opt.utilisation,
                headroom=1.0 - opt.utilisation,
                checkpoint=cls.checkpoints.get(opt.plan.layout.weight_dtype.name),
            )
        )
    return pools


def _slug(unit_id: str) -> str:
    """A DNS-label fragment of a unit id: ``A100-80GB-SXM/1g.10gb`` -> ``a100-80gb-sxm-1g-10gb``."""
    out = "".join(ch if ch.isalnum() else "-" for ch in unit_id.lower())
    return "-".join(part for part in out.split("-") if part)


def _tiers(pools: Sequence[FleetPool]) -> list[TierSummary]:
    out = []
    for tier in ("hpc", "general", "cost"):
        members = [p for p in pools if p.tier == tier]
        if not members:
            continue
        capacity = sum(p.rate_rps / p.utilisation for p in members if p.utilisation > 0)
        out.append(
            TierSummary(
                tier=members[0].tier,
                units=sorted({p.unit for p in members}),
                physical_gpus=sum(p.physical_gpus for p in members),
                usd_per_month=sum(p.usd_per_month for p in members),
                utilisation=sum(p.rate_rps for p in members) / capacity if capacity > 0 else 0.0,
            )
        )
    return out


def _single_type(
    spec: FleetSpec,
    options: Sequence[Sequence[PoolOption]],
    misses: Sequence[Sequence[SizingMiss]],
    units: Sequence[PoolUnit],
    pricing: Pricing,
) -> list[SingleTypeFleet]:
    """Every class on one unit type: its cost, or the first class it cannot serve."""
    out = []
    for unit in units:
        picked = [next((o for o in opts if o.unit == unit.id), None) for opts in options]
        if all(p is not None for p in picked):
            cost = fleet_cost([p for p in picked if p is not None], pricing)
            out.append(SingleTypeFleet(unit=unit.id, usd_per_month=monthly_usd(usd_per_hour=cost)))
            continue
        i = next(i for i, p in enumerate(picked) if p is None)
        why = next((m.reason for m in misses[i] if m.unit == unit.id), "not sized")
        out.append(SingleTypeFleet(unit=unit.id, usd_per_month=None, reason=f"{spec.classes[i].name}: {why}"))
    return out


def _notes(spec: FleetSpec, pools: Sequence[FleetPool]) -> list[str]:
    notes = [
        "latencies are steady-state means; pools run at most at "
        f"{spec.headroom:.0%} of their SLA-limited load (P99 needs the serving simulator)",
        "one pool per class: a class is routed whole to one GPU or MIG-slice type",
    ]
    if any(p.mig_profile for p in pools):
        notes.append(
            "MIG slices priced at the GPU-hour / max instances of the profile; one replica per slice"
        )
    if any(p.owned_units for p in pools):
        notes.append(f"owned units cost ${spec.owned_usd_per_gpu_hour:g} per GPU-hour")
    return notes

"""Size one workload class on one pool unit with the steady-state model of ``recommend``.

For a class (model, rate, lengths, SLA) and a unit (GPU or MIG slice), the cheapest feasible plan of
``gpuplan.core.recommend.search`` gives the pool (layout, replicas, cost); the SLA-limited load of one
replica (``max_load_under_sla``) gives its utilisation. Latencies are steady-state means: the
pool runs at most at ``headroom`` of that ceiling. A serving simulator would plug in here, in
:func:`load_ceiling`, replacing the mean-latency ceiling with the load at which the simulated P99
meets the SLA.
"""

from __future__ import annotations

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.fleet.pool_units import PoolUnit
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.request import Plan, SearchSpace
from gpuplan.core.recommend.search import max_load_under_sla, one_replica, rank, search
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload

SINGLE_DEVICE = (1,)
"""A MIG slice has no peer links: one replica per slice (tp = pp = 1)."""


class PoolOption(FrozenModel):
    """One way to serve a class: its pool on one unit."""

    workload_class: str
    unit: str
    plan: Plan
    units: int
    usd_per_unit_hour: float
    rate_rps: float
    max_rps_per_replica: float
    utilisation: float


class SizingMiss(FrozenModel):
    """Why a class cannot be served on a unit."""

    workload_class: str
    unit: str
    reason: str


def class_space(
    unit: PoolUnit, dtypes: tuple[str, ...], engine: str, max_gpus: int, headroom: float
) -> SearchSpace:
    """The recommend search space of one class on one unit: aggregated replicas (a pool unit is one
    kind of worker; disaggregated pools are ``recommend``'s)."""
    layouts = SINGLE_DEVICE if unit.is_mig else (1, 2, 4, 8)
    return SearchSpace(
        weight_dtypes=dtypes,
        max_gpus=max_gpus,
        tp_options=layouts,
        pp_options=layouts,
        engine=engine,
        headroom=headroom,
        layout_kinds=("aggregated",),
    )


def load_ceiling(replica: ReplicaModel, target: Workload, sla: Sla) -> float:
    """Requests/s one replica sustains within the SLA (mean latencies; the P99 plug-in point)."""
    return max_load_under_sla(replica, target, sla)


def size_class(
    name: str,
    model: ModelSpec,
    unit: PoolUnit,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> PoolOption | SizingMiss:
    """The cheapest pool of ``unit`` that serves ``target`` within ``sla``, or why none does."""
    if unit.offer.usd_per_gpu_hour is None:
        return SizingMiss(
            workload_class=name,
            unit=unit.id,
            reason=unit.offer.price_missing or f"no price for {unit.parent.id}",
        )
    plans, misses = search(model, [unit.offer], target, sla, space, cal=cal)
    if not plans:
        nearest = min((m for ms in misses.values() for m in ms), key=lambda m: m.distance, default=None)
        reason = nearest.rejection.reason if nearest else "no layout"
        return SizingMiss(workload_class=name, unit=unit.id, reason=reason)
    best = rank(plans, "cost")[0]
    try:
        replica = one_replica(model, unit.offer.gpu, best.layout, target, cal)
    except InfeasibleError as exc:  # pragma: no cover - search built the same replica
        return SizingMiss(workload_class=name, unit=unit.id, reason=exc.message)
    ceiling = load_ceiling(replica, target, sla)
    rate = target.rate_rps or 0.0
    return PoolOption(
        workload_class=name,
        unit=unit.id,
        plan=best.model_copy(update={"gpu": unit.id}),
        units=best.layout.num_gpus,
        usd_per_unit_hour=unit.offer.usd_per_gpu_hour,
        rate_rps=rate,
        max_rps_per_replica=ceiling,
        utilisation=rate / (best.layout.replicas * ceiling) if ceiling > 0 else 1.0,
    )

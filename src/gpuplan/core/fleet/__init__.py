"""Fleet planning: several workload classes on pools of different GPU types (and MIG slices).

Core modules (pure): ``spec`` (the fleet file), ``pool_units`` (GPUs and MIG slices as pool units),
``sizing`` (one class on one unit, via ``gpuplan.core.recommend``), ``assign`` (routing classes to
units), ``planner`` (``plan_fleet``). Use case: :mod:`gpuplan.usecases.fleet` (files, catalog, models,
training).
"""

from __future__ import annotations

from gpuplan.core.fleet.planner import FleetPlan, FleetPool, plan_fleet
from gpuplan.core.fleet.spec import FleetSpec, WorkloadClass

__all__ = ["FleetPlan", "FleetPool", "FleetSpec", "WorkloadClass", "plan_fleet"]

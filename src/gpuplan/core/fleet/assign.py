"""Route each class to one pool unit so that the fleet is cheapest, counting owned GPUs.

Without an inventory the problem separates: each class takes its cheapest unit. Owned GPUs couple
the classes (two classes may both want the 8 owned A100s), so the fleet cost is not a sum of class
costs. Fleets are small (a handful of classes × a handful of GPU types), so the search is exact
enumeration of every assignment when there are at most ``EXACT_LIMIT`` of them (8 classes × 4
units = 65 536); beyond that it is greedy (each class's cheapest unit) followed by first-improvement
local search over single-class moves until no move lowers the cost. An ILP would be exact at any
size but adds a solver dependency for a problem that, in practice, enumerates in milliseconds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuplan.core.fleet.sizing import PoolOption

EXACT_LIMIT = 65_536
"""Most assignments enumerated exactly (8 classes × 4 units); a full evaluation costs ~µs each."""
LOCAL_SEARCH_ROUNDS = 100
"""Bound on improvement rounds of the local search (each round tries every single-class move)."""


@dataclass(frozen=True)
class Pricing:
    """What a unit-hour costs: list price above the owned count, the owned rate below it."""

    owned_units: Mapping[str, int]
    owned_usd_per_gpu_hour: float
    gpus_per_unit: Mapping[str, float]


@dataclass(frozen=True)
class Assignment:
    options: tuple[PoolOption, ...]
    usd_per_hour: float
    method: str


def units_used(options: Sequence[PoolOption]) -> dict[str, int]:
    used: dict[str, int] = {}
    for opt in options:
        used[opt.unit] = used.get(opt.unit, 0) + opt.units
    return used


def owned_split(options: Sequence[PoolOption], pricing: Pricing) -> dict[str, tuple[int, int]]:
    """Per unit: (owned units used, billable units)."""
    out = {}
    for unit, n in units_used(options).items():
        owned = min(n, pricing.owned_units.get(unit, 0))
        out[unit] = (owned, n - owned)
    return out


def fleet_cost(options: Sequence[PoolOption], pricing: Pricing) -> float:
    """$/hour of a set of pools."""
    price = {o.unit: o.usd_per_unit_hour for o in options}
    total = 0.0
    for unit, (owned, billable) in owned_split(options, pricing).items():
        owned_rate = pricing.owned_usd_per_gpu_hour * pricing.gpus_per_unit.get(unit, 1.0)
        total += billable * price[unit] + owned * owned_rate
    return total


def _key(options: Sequence[PoolOption], pricing: Pricing) -> tuple[float, int, tuple[str, ...]]:
    """Cheapest, then fewest GPU types, then a stable order."""
    return (
        round(fleet_cost(options, pricing), 9),
        len({o.unit for o in options}),
        tuple(o.unit for o in options),
    )


def assign(choices: Sequence[Sequence[PoolOption]], pricing: Pricing) -> Assignment:
    """The cheapest assignment: one option per class (every ``choices[i]`` is non-empty)."""
    size = math.prod(len(c) for c in choices)
    if size <= EXACT_LIMIT:
        best = min(itertools.product(*choices), key=lambda combo: _key(combo, pricing))
        return Assignment(best, fleet_cost(best, pricing), f"exact over {size} assignments")
    current = [min(c, key=lambda o: o.units * o.usd_per_unit_hour) for c in choices]
    rounds = _improve(current, choices, pricing)
    return Assignment(
        tuple(current),
        fleet_cost(current, pricing),
        f"greedy + local search ({rounds} rounds; {size} assignments exceed the exact limit {EXACT_LIMIT})",
    )


def _improve(current: list[PoolOption], choices: Sequence[Sequence[PoolOption]], pricing: Pricing) -> int:
    """First-improvement single-class moves, in place; returns the rounds run."""
    for rounds in range(1, LOCAL_SEARCH_ROUNDS + 1):
        improved = False
        for i, options in enumerate(choices):
            for opt in options:
                trial = [*current[:i], opt, *current[i + 1 :]]
                if _key(trial, pricing) < _key(current, pricing):
                    current[i] = opt
                    improved = True
        if not improved:
            return rounds
    return LOCAL_SEARCH_ROUNDS

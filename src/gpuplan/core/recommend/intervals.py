"""Intervals on a plan's figures, and the capacity interval carried through the queue to its P99s.

Each figure reads the error-model group of its metric at the plan's load regime (its served share of
the replica's saturation rate, ``uncertainty.load_regime``), the GPU's evidence level (calibrated or
priors only) and a known engine: ``low = predicted · exp q((1−L)/2)``, ``high = predicted · exp
q((1+L)/2)``.

A P99 also moves with the replica's capacity, and near the knee a small capacity error is a large P99
error. A replica whose capacity is ``c`` times the prediction is the predicted replica with every time
stretched by 1/c, so at a per-replica rate r its P99 is ``P99(r / c) / c`` (``P99`` the tail model,
``core/sim/tail_model.py``). With (c_lo, c_hi) the saturated throughput group's interval, a P99-sized
plan's P99 interval is

    low  = P99 · [P99(r / c_hi) / c_hi] / P99(r) · exp q_latency((1−L)/2)
    high = P99 · [P99(r / c_lo) / c_lo] / P99(r) · exp q_latency((1+L)/2)

(the tail model's ratio applied to the plan's P99, simulated or not), null at the high end when r /
c_lo is past the replica's stability limit. Far from capacity the ratio is about 1/c; near it, it
grows without bound, so the interval widens as the load approaches capacity.
"""

from __future__ import annotations

from gpuplan.core.calibration.error_model import ErrorModel, group_path
from gpuplan.core.calibration.uncertainty import IntervalSource, Uncertainty, band, load_regime, source
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.request import Plan, PlanFigures, PlanInterval
from gpuplan.core.sim.tail_model import TailEstimate, tail_estimate
from gpuplan.core.workload import Workload

FIGURES = (
    ("ttft_ms", "ttft", "ttft_ms_mean"),
    ("tpot_ms", "tpot", "tpot_ms_mean"),
    ("output_tokens_per_s", "throughput", "output_tokens_per_s"),
)
P99_FIGURES = (("ttft_p99_ms", "ttft", "ttft_ms_p99"), ("tpot_p99_ms", "tpot", "tpot_ms_p99"))
CAPACITY_METRIC = ("throughput", "saturated", "output_tokens_per_s")


def figure_path(family: str, regime: str, calibrated: bool, metric: str) -> tuple[str, ...]:
    """A plan figure's group path (its engine is always known: a plan names it)."""
    return group_path(family=family, regime=regime, gpu_fitted=calibrated, engine_known=True, metric=metric)


def utilisation(*, plan: Plan, replica: ReplicaModel, target: Workload) -> float:
    """The plan's served output tokens/s per replica over the replica's saturated (offline) rate."""
    offline = Workload(
        scenario="offline", input_tokens=target.input_tokens, output_tokens=target.output_tokens
    )
    saturated = replica.run(offline)[2]
    return plan.output_tokens_per_s / plan.layout.replicas / saturated if saturated > 0 else 1.0


def _p99s(est: TailEstimate) -> dict[str, float]:
    return {"ttft_p99_ms": est.ttft_p99_ms, "tpot_p99_ms": est.tpot_p99_ms}


def queue_ratios(
    *, replica: ReplicaModel, target: Workload, replicas: int, capacity: tuple[float, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per P99 figure, P99(r/c)/c over P99(r) at the capacity interval's fast end (c_hi) and slow end
    (c_lo); inf where the slow end is past the stability limit."""
    shape = {"input_tokens": target.input_tokens, "output_tokens": target.output_tokens}
    rate = (target.rate_rps or 0.0) / replicas
    base = _p99s(tail_estimate(replica, **shape, rate_rps=rate))
    c_lo, c_hi = capacity
    fast = _p99s(tail_estimate(replica, **shape, rate_rps=rate / c_hi))
    slow = _p99s(tail_estimate(replica, **shape, rate_rps=rate / c_lo))
    low = {k: fast[k] / c_hi / base[k] for k in base}
    high = {k: slow[k] / c_lo / base[k] for k in base}
    return low, high


def _finite(value: float) -> float | None:
    return value if value < float("inf") else None


def with_intervals(*, plan: Plan, replica: ReplicaModel, target: Workload, uncertainty: Uncertainty) -> Plan:
    """``plan`` with ``low``, ``high`` and ``interval`` (module docstring); unchanged when the error
    model has no group for its figures."""
    model, level = uncertainty.model, uncertainty.level
    regime = load_regime(utilisation(plan=plan, replica=replica, target=target))
    low: dict[str, float | None] = {}
    high: dict[str, float | None] = {}
    sources: dict[str, IntervalSource] = {}
    for name, family, metric in FIGURES:
        if not _bound(
            plan, name, figure_path(family, regime, plan.calibrated, metric), model, level, low, high, sources
        ):
            return plan
    if target.rate_rps is not None:  # a plan carries its offered load: throughput is that, not uncertain
        low["output_tokens_per_s"] = high["output_tokens_per_s"] = plan.output_tokens_per_s
    capacity_source = None
    if plan.sized_on == "p99" and plan.ttft_p99_ms is not None and target.rate_rps is not None:
        capacity_path = figure_path(
            CAPACITY_METRIC[0], CAPACITY_METRIC[1], plan.calibrated, CAPACITY_METRIC[2]
        )
        capacity = band(model=model, path=capacity_path, level=level)
        if capacity is not None:
            capacity_source = source(model=model, path=capacity_path)
            ratios = queue_ratios(
                replica=replica, target=target, replicas=plan.layout.replicas, capacity=capacity
            )
            for name, family, metric in P99_FIGURES:
                path = figure_path(family, regime, plan.calibrated, metric)
                _bound(
                    plan,
                    name,
                    path,
                    model,
                    level,
                    low,
                    high,
                    sources,
                    ratios=(ratios[0][name], ratios[1][name]),
                )
    return plan.model_copy(
        update={
            "low": PlanFigures.model_validate(low),
            "high": PlanFigures.model_validate(high),
            "interval": PlanInterval(level=level, sources=sources, capacity=capacity_source),
        }
    )


def _bound(
    plan: Plan,
    name: str,
    path: tuple[str, ...],
    model: ErrorModel,
    level: float,
    low: dict[str, float | None],
    high: dict[str, float | None],
    sources: dict[str, IntervalSource],
    ratios: tuple[float, float] = (1.0, 1.0),
) -> bool:
    """Set ``name``'s ends (the figure times the group's band and ``ratios``); False without a group."""
    ends, where, value = (
        band(model=model, path=path, level=level),
        source(model=model, path=path),
        getattr(plan, name),
    )
    if ends is None or where is None or value is None:
        return False
    low[name] = _finite(value * ends[0] * ratios[0])
    high[name] = _finite(value * ends[1] * ratios[1])
    sources[name] = where
    return True

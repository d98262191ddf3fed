"""Intervals on ``simulate``'s summary: throughput and the TTFT/TPOT P50 and P99, from the error model.

Each figure reads the error-model group of its metric (``ttft_ms_p50``, ``tpot_ms_p99``, …) at the
run's load regime, the GPU's evidence level (its family fitted on measurements or priors only) and a
known engine (the deployment names one), as ``core/recommend/intervals.py`` does for a plan:

* every request at once (``offline``): ``saturated``; one closed-loop client per replica: ``single``;
* otherwise the served share of the replicas' saturated (offline) output tokens/s: below 0.5 ``light
  load``, below 1 ``near the knee``, else ``past saturation`` (``uncertainty.load_regime``).

For open-loop (Poisson or gamma) arrivals below saturation the throughput is the offered load, so it
has no spread, and the P99s carry the saturated-throughput interval (c_lo, c_hi) through the queue
exactly as a plan's do: ``P99 · [P99(r/c)/c] / P99(r)`` by the tail model (``queue_ratios``), so the
P99 interval widens as the load nears capacity and its high end is open (null) past it.
"""

from __future__ import annotations

import math

from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.uncertainty import Bounds, Uncertainty, band, bounds, load_regime
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.intervals import CAPACITY_METRIC, queue_ratios
from gpuplan.core.sim.metrics import SimSummary
from gpuplan.core.sim.workload import WorkloadSpec
from gpuplan.core.workload import Workload

SIM_FIGURES = (
    ("output_tokens_per_s", "throughput", "output_tokens_per_s"),
    ("ttft_p50_ms", "ttft", "ttft_ms_p50"),
    ("ttft_p99_ms", "ttft", "ttft_ms_p99"),
    ("tpot_p50_ms", "tpot", "tpot_ms_p50"),
    ("tpot_p99_ms", "tpot", "tpot_ms_p99"),
)
"""(figure, error-model family, error-model metric) of the summary's figures that get an interval."""
OPEN_LOOP = ("poisson", "gamma")


def _shape(spec: WorkloadSpec) -> dict[str, int]:
    return {
        "input_tokens": max(round(spec.input_tokens.mean_tokens), 1),
        "output_tokens": max(round(spec.output_tokens.mean_tokens), 1),
    }


def sim_regime(
    *, summary: SimSummary, replica: ReplicaModel, spec: WorkloadSpec, replicas: int, at_once: bool
) -> str:
    """The error model's regime of a run (module docstring)."""
    if at_once:
        return "saturated"
    if spec.arrival.kind == "closed_loop" and (spec.arrival.concurrency or 1) <= replicas:
        return "single"
    saturated = replica.run(Workload(scenario="offline", **_shape(spec)))[2] * replicas
    return load_regime(summary.output_tokens_per_s / saturated if saturated > 0 else 1.0)


def figure_value(summary: SimSummary, name: str) -> float | None:
    if name == "output_tokens_per_s":
        return summary.output_tokens_per_s
    metric, stat = name.split("_", 1)
    value = getattr(getattr(summary, metric), stat)
    return None if value is None else float(value)


def _queued(end: float | None, ratio: float, *, slow_end: bool) -> float | None:
    """An end times the queue's ratio. Where the tail model finds the run's own rate past its stability
    limit (a run the simulator still served) the ratio is 0/inf or inf/inf: the fast end keeps the
    group's band and the slow end is open (None), as past the slow end's capacity."""
    if end is None:
        return None
    if math.isfinite(ratio) and ratio > 0 and math.isfinite(end * ratio):
        return end * ratio
    return None if slow_end else end


def simulation_bounds(
    *,
    summary: SimSummary,
    replica: ReplicaModel,
    spec: WorkloadSpec,
    replicas: int,
    at_once: bool,
    fitted: bool,
    uncertainty: Uncertainty,
) -> Bounds:
    """The summary's figures with their intervals at ``uncertainty.level`` (module docstring);
    ``fitted``: the GPU's family was calibrated on measurements."""
    regime = sim_regime(summary=summary, replica=replica, spec=spec, replicas=replicas, at_once=at_once)

    def path(family: str, reg: str, metric: str) -> tuple[str, ...]:
        return group_path(family=family, regime=reg, gpu_fitted=fitted, engine_known=True, metric=metric)

    figures = {
        name: (figure_value(summary, name), path(family, regime, metric))
        for name, family, metric in SIM_FIGURES
    }
    out = bounds(uncertainty=uncertainty, figures=figures)
    rate = spec.arrival.rate_rps
    if spec.arrival.kind not in OPEN_LOOP or rate is None or regime == "past saturation":
        return out
    low, high = dict(out.low), dict(out.high)
    if "output_tokens_per_s" in low:  # below saturation the run carries its offered load
        low["output_tokens_per_s"] = high["output_tokens_per_s"] = summary.output_tokens_per_s
    capacity = band(model=uncertainty.model, path=path(*CAPACITY_METRIC), level=uncertainty.level)
    if capacity is not None:
        target = Workload(scenario="rate", rate_rps=rate, **_shape(spec))
        ratios = queue_ratios(replica=replica, target=target, replicas=replicas, capacity=capacity)
        for name in ("ttft_p99_ms", "tpot_p99_ms"):
            low[name] = _queued(low.get(name), ratios[0][name], slow_end=False)
            high[name] = _queued(high.get(name), ratios[1][name], slow_end=True)
    return out.model_copy(update={"low": low, "high": high})

"""The predicted curve of a report: ``gpuplan simulate`` of the deployment at the curve's loads and
between them (Poisson arrivals for rate runs, a closed loop for concurrency runs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.simulate import SimulateScenario
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.sim.metrics import SimSummary
from gpuplan.usecases.results_report.model import Curve, Deployment, Predicted, RunView
from gpuplan.usecases.simulate import simulate_scenario

SIM_FIELDS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2e"}
"""Each stored latency and the ``SimSummary`` distribution that predicts it."""
GRID_POINTS = 6
"""Loads the predicted curve is simulated at, evenly spread over the measured ones (which it also includes)."""
RATE_REQUESTS = 600
"""Requests simulated per rate point: ~0.02 s of CPU each (docs/simulator.md: 10,000 take 0.24–0.33 s)."""
REQUESTS_PER_CLIENT = 30
"""A closed loop runs ~30 requests per client to reach its steady state (``usecases/simulate.py``)."""
MAX_SIM_REQUESTS = 20_000


def _grid(loads: Sequence[float], integer: bool) -> list[float]:
    """The measured loads and ``GRID_POINTS`` between their least and greatest (±50 % around one)."""
    low, high = min(loads), max(loads)
    if high <= low:
        low, high = low * 0.5, high * 1.5
    points = {*loads, *np.linspace(low, high, GRID_POINTS).tolist()}
    if integer:
        points = {float(max(1, round(p))) for p in points}
    return sorted(p for p in points if p > 0)


def _lengths(runs: Sequence[RunView]) -> tuple[int, int]:
    """The prompt and answer lengths to simulate: the mean over the runs of what they measured (a
    dataset's real lengths, answers cut short by EOS), else the lengths they asked for."""
    found = []
    for key in ("input_tokens", "output_tokens"):
        measured = [v.measured(f"{key}_mean") for v in runs]
        asked = [float(v.run.config.get(key) or 1) for v in runs]
        values = [m if m is not None else a for m, a in zip(measured, asked, strict=True)]
        found.append(max(round(sum(values) / len(values)), 1))
    return found[0], found[1]


def _scenario(
    dep: Deployment, lengths: tuple[int, int], mode: str, load: float, seed: int
) -> SimulateScenario:
    workload: dict[str, Any] = {"scenario": mode, "input_tokens": lengths[0], "output_tokens": lengths[1]}
    if mode == "rate":
        workload["rate_rps"] = load
        requests = RATE_REQUESTS
    else:
        workload["concurrency"] = int(load)
        requests = min(max(RATE_REQUESTS, REQUESTS_PER_CLIENT * int(load)), MAX_SIM_REQUESTS)
    return SimulateScenario.model_validate(
        {
            "model": dep.model,
            "hardware": {"gpu": dep.gpu, "count": dep.tp},
            "parallelism": {"tp": dep.tp},
            "precision": {"weights": dep.weight_dtype},
            "engine": dep.engine,
            "workload": workload,
            "arrival": {"num_requests": requests, "seed": seed},
        }
    )


def _predicted(summary: SimSummary, load: float) -> Predicted:
    latency: dict[str, dict[str, float | None]] = {}
    for key, name in SIM_FIELDS.items():
        d = getattr(summary, name)
        latency[key] = {"mean": d.mean_ms, "p50": d.p50_ms, "p90": d.p90_ms, "p99": d.p99_ms}
    return Predicted(
        load=load,
        latency_ms=latency,
        output_tokens_per_s=summary.output_tokens_per_s,
        requests_per_s=summary.requests_per_s,
    )


def predict_curve(curve: Curve, catalog: Catalog, cal: Calibration | None) -> tuple[Curve, str | None]:
    """The curve with its prediction over its loads, or unchanged and the reason it has none."""
    dep = curve.deployment
    loads = [v.load for v in curve.runs if v.load is not None]
    if dep is None or not loads:
        return curve, None
    lengths, seed = _lengths(curve.runs), int(curve.runs[0].run.config.get("seed") or 0)
    try:
        get_model(dep.model)
        points = []
        for x in _grid(loads, integer=curve.mode == "concurrency"):
            sc = _scenario(dep, lengths, curve.mode, x, seed)
            points.append(_predicted(simulate_scenario(sc, catalog, base_dir=None, cal=cal).summary, x))
    except GpuplanError as exc:
        return curve, f"no predicted curve for {curve.label}: {exc.one_line()}"
    runs = tuple(dataclasses.replace(v, predicted=_nearest(points, v.load)) for v in curve.runs)
    return Curve(curve.label, curve.mode, runs, dep, tuple(points)), None


def _nearest(points: Sequence[Predicted], load: float | None) -> Predicted | None:
    if load is None or not points:
        return None
    return min(points, key=lambda p: abs(p.load - load))

"""``simulate`` as a use case shared by the CLI and the web app: scenario → workload (and trace) →
replica model → simulation → summary (and the capacity under the SLO when asked).

Reads the trace file a scenario names (relative to ``base_dir``); the web app passes no ``base_dir``
and so accepts no trace files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.simulate import SimulateScenario
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.perf.inference import ReplicaModel, check_generative
from gpuplan.core.sim.capacity import CapacityResult, max_rate_under_slo
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import Progress, SimResult, simulate
from gpuplan.core.sim.workload import LengthDist, Requests, WorkloadSpec, generate, parse_trace
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.resolve import deployment_gpu, deployment_layout

CAPACITY_SEARCH_MAX_REQUESTS = 4000
"""Requests per probe of the capacity bisection: enough for a steady P99, bounded in time."""


@dataclass(frozen=True)
class SimulationOutcome:
    """What one ``simulate`` produced."""

    result: SimResult
    summary: SimSummary
    capacity: CapacityResult | None


def read_text(path: Path, what: str) -> str:
    """A scenario or trace file's text; FileFormatError naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read {what} {path}: {exc}", hint="check the path") from None


def _check_workload(sc: SimulateScenario) -> None:
    """Nothing a user wrote is silently ignored, and lengths are never silently 1 token."""
    wl = sc.workload
    given = wl.model_fields_set
    if wl.arrival.kind == "trace":
        ignored = sorted(given & {"input_tokens", "output_tokens", "num_requests", "seed"})
        if ignored:
            raise UserInputError(
                f"workload.{ignored[0]}: a trace gives every request's arrival and lengths",
                hint=f"remove {', '.join(ignored)}, or use lengths_from_trace with another arrival kind",
            )
    elif wl.trace is not None and not wl.lengths_from_trace:
        raise UserInputError(
            f"workload.trace is named but {wl.arrival.kind} arrivals do not use it",
            hint="set arrival kind: trace, or lengths_from_trace: true to resample its lengths",
        )
    elif not wl.lengths_from_trace:
        missing = [name for name in ("input_tokens", "output_tokens") if name not in given]
        if missing:
            raise UserInputError(
                f"workload.{missing[0]} is required",
                hint="e.g. input_tokens: {value: 1000} (docs/simulator.md)",
            )


def _trace(sc: SimulateScenario, base: Path | None) -> Requests | None:
    wl = sc.workload
    if wl.trace is not None and base is None:
        raise UserInputError("workload.trace: trace files are not accepted here", hint="use gpuplan simulate")
    _check_workload(sc)
    if wl.trace is None or base is None:
        if wl.arrival.kind == "trace" or wl.lengths_from_trace:
            raise UserInputError("workload.trace is required for trace arrivals or lengths_from_trace")
        return None
    path = Path(wl.trace) if Path(wl.trace).is_absolute() else base / wl.trace
    kind = wl.trace_format or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv")
    return parse_trace(read_text(path, "trace"), origin=str(path), fmt=kind)


def _spec(sc: SimulateScenario, trace: Requests | None) -> WorkloadSpec:
    wl = sc.workload
    # the workload's own fields, less the file's trace settings (SimWorkload extends WorkloadSpec)
    spec = WorkloadSpec(**{name: getattr(wl, name) for name in WorkloadSpec.model_fields})
    if trace is not None:  # the capacity search resamples a trace's lengths under Poisson arrivals
        spec = spec.model_copy(
            update={
                "num_requests": len(trace) if wl.arrival.kind == "trace" else wl.num_requests,
                "input_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in np.maximum(trace.input_tokens, 1))
                ),
                "output_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in trace.output_tokens)
                ),
            }
        )
    return spec


def _replica(
    sc: SimulateScenario, catalog: Catalog, requests: Requests, cal: Calibration | None
) -> ReplicaModel:
    """The replica, built for ``max_model_len`` (default: the longest request, capped at the model's
    context window); requests longer than that are rejected, as an engine would."""
    model, gpu = get_model(sc.model), deployment_gpu(sc, catalog)
    check_generative(model)  # an encoder has no answer to simulate (as predict and recommend say)
    layout = deployment_layout(sc, model, gpu)
    longest = int((requests.input_tokens + requests.output_tokens).max())
    context = sc.max_model_len or min(longest, model.max_position_embeddings or longest)
    return ReplicaModel.build(model, gpu, layout, context_tokens=context, cal=cal or default_calibration())


def simulate_scenario(
    sc: SimulateScenario,
    catalog: Catalog,
    *,
    base_dir: Path | None,
    cal: Calibration | None = None,
    progress: Progress | None = None,
) -> SimulationOutcome:
    """Run a simulate scenario (and its capacity search when ``capacity_search`` is set); ``progress``
    receives the share of requests started during the main run."""
    trace = _trace(sc, base_dir)
    spec = _spec(sc, trace)
    requests = generate(spec, trace)
    replica = _replica(sc, catalog, requests, cal)
    result = simulate(replica, requests, sc.simulation, progress=progress)
    summary = summarise(result, slo=sc.slo, warmup_fraction=sc.simulation.warmup_fraction)
    capacity = None
    if sc.capacity_search:
        if sc.slo.empty:
            raise UserInputError(
                "capacity_search needs an slo", hint="e.g. slo: {ttft_p99_ms: 1000, tpot_p99_ms: 50}"
            )
        config = sc.simulation.model_copy(update={"record_timeline": False})
        probe = spec.model_copy(update={"num_requests": min(spec.num_requests, CAPACITY_SEARCH_MAX_REQUESTS)})
        capacity = max_rate_under_slo(replica, probe, sc.slo, config)
    return SimulationOutcome(result=result, summary=summary, capacity=capacity)

"""``simulate`` as a use case shared by the CLI and the web app: scenario → simulated traffic (and
trace) → replica model → simulation → summary, the ``sla`` checks (and the capacity under the P99
limits when asked).

The traffic is the document's ``arrival:`` section where given, else derived from its ``workload:``
(:func:`traffic`): rate → Poisson at ``rate_rps``; concurrency → a closed loop of that many clients
(one per replica when left out), started over one analytic request cycle; single → one client;
offline → every request at t = 0; fixed lengths of ``input_tokens`` / ``output_tokens``.

Reads the trace file a scenario names (relative to ``base_dir``); the web app passes no ``base_dir``
and so accepts no trace files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.arrival import ArrivalSection
from gpuplan.adapters.scenario_files.simulate import SimulateScenario
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import Bounds, Uncertainty
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel, check_generative
from gpuplan.core.perf.layout import Layout
from gpuplan.core.sim.capacity import CapacityResult, max_rate_under_slo
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import Progress, SimResult, simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, Requests, WorkloadSpec, generate, parse_trace
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.resolve import deployment_gpu, deployment_layout, prefix_hit_rate
from gpuplan.usecases.simulate_intervals import simulation_bounds

CAPACITY_SEARCH_MAX_REQUESTS = 4000
"""Requests per probe of the capacity bisection: enough for a steady P99, bounded in time."""
DEFAULT_NUM_REQUESTS = 1000
"""Requests simulated when ``arrival.num_requests`` is left out: the P99 then rests on the 10 slowest
requests, and a run costs ~0.03 s of CPU (10,000 requests take 0.24–0.33 s on the 2-core machine,
docs/simulator.md). The older simulate documents had the same default."""
REQUESTS_PER_CLIENT = 30
"""A closed loop left without ``num_requests`` runs at least this many requests per client, as the
validation's closed loops do (``usecases/validation/predict_server.py``): the first waves are a
transient, ~30 cycles per client reach the steady state."""
MAX_NUM_REQUESTS = 10_000_000
"""The bound of ``WorkloadSpec.num_requests``."""
DERIVED_KIND = {
    "rate": "poisson",
    "concurrency": "closed_loop",
    "single": "closed_loop",
    "offline": "at_once",
}
"""The arrival process simulate derives from ``workload.scenario`` (``at_once``: every request at t = 0)."""
LIMIT_STATS = {
    "ttft_ms": ("ttft", "mean_ms"),
    "tpot_ms": ("tpot", "mean_ms"),
    "ttft_p99_ms": ("ttft", "p99_ms"),
    "tpot_p99_ms": ("tpot", "p99_ms"),
    "e2e_p99_ms": ("e2e", "p99_ms"),
}
"""Each ``sla`` limit and the simulated statistic it bounds (``SimSummary`` distribution, field)."""


class LimitCheck(FrozenModel):
    """One ``sla`` limit against the simulated statistic it bounds (``measured_ms`` None: no request
    reached it, e.g. TPOT of one-token answers)."""

    limit: str
    limit_ms: float
    measured_ms: float | None
    met: bool


@dataclass(frozen=True)
class SimulationOutcome:
    """What one ``simulate`` produced."""

    result: SimResult
    summary: SimSummary
    capacity: CapacityResult | None
    sla: tuple[LimitCheck, ...] = ()
    interval: Bounds | None = None
    """The summary's intervals (``simulate_intervals.py``); None without an error model."""


@dataclass(frozen=True)
class Traffic:
    """The simulated workload, whether every request arrives at t = 0, and whether the closed loop's
    ramp is the default (one analytic request cycle, set once the replica is built)."""

    spec: WorkloadSpec
    at_once: bool = False
    default_ramp: bool = False


def read_text(path: Path, what: str) -> str:
    """A scenario or trace file's text; FileFormatError naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read {what} {path}: {exc}", hint="check the path") from None


def _arrival(sc: SimulateScenario) -> ArrivalSection:
    return sc.arrival or ArrivalSection()


def _check_trace_use(sc: SimulateScenario) -> None:
    """Nothing a user wrote is silently ignored: a trace gives arrivals and lengths, or only lengths."""
    arr = _arrival(sc)
    if arr.kind == "trace":
        ignored = sorted(arr.model_fields_set & {"input_tokens", "output_tokens", "num_requests", "seed"})
        if ignored:
            raise UserInputError(
                f"arrival.{ignored[0]}: a trace gives every request's arrival and lengths",
                hint=f"remove {', '.join(ignored)}, or use lengths_from_trace with another arrival kind",
            )
    elif arr.trace is not None and not arr.lengths_from_trace:
        raise UserInputError(
            f"arrival.trace is named but {arr.kind or 'the derived'} arrivals do not use it",
            hint="set arrival kind: trace, or lengths_from_trace: true to resample its lengths",
        )
    if arr.trace is None and (arr.kind == "trace" or arr.lengths_from_trace):
        raise UserInputError("arrival.trace is required for trace arrivals or lengths_from_trace")


def _trace(sc: SimulateScenario, base: Path | None) -> Requests | None:
    arr = _arrival(sc)
    if arr.trace is not None and base is None:
        raise UserInputError("arrival.trace: trace files are not accepted here", hint="use gpuplan simulate")
    _check_trace_use(sc)
    if arr.trace is None or base is None:
        return None
    path = Path(arr.trace) if Path(arr.trace).is_absolute() else base / arr.trace
    kind = arr.trace_format or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv")
    return parse_trace(read_text(path, "trace"), origin=str(path), fmt=kind)


def _kind(sc: SimulateScenario) -> str:
    """The arrival process: ``arrival.kind``, else the one ``workload.scenario`` stands for."""
    arr, wl = _arrival(sc), sc.workload
    if arr.kind is not None:
        return arr.kind
    if wl is None:
        raise UserInputError("arrival.kind is required without a workload", hint="e.g. kind: poisson")
    if wl.scenario not in DERIVED_KIND:
        raise UserInputError(
            f"workload.scenario {wl.scenario}: simulate runs continuous batching, not static batches",
            hint="use scenario offline (every request at t = 0) or concurrency, or give arrival.kind",
        )
    return DERIVED_KIND[wl.scenario]


def _process(sc: SimulateScenario, kind: str, replicas: int) -> ArrivalSpec:
    """The arrival process of ``kind``, its load from ``arrival`` or else ``workload``."""
    arr, wl = _arrival(sc), sc.workload
    if kind in ("poisson", "gamma"):
        rate = arr.rate_rps or (wl.rate_rps if wl else None)
        if rate is None:
            raise UserInputError(
                f"workload.rate_rps is required for {kind} arrivals", hint="e.g. rate_rps: 5"
            )
        return ArrivalSpec(kind=kind, rate_rps=rate, cv=arr.cv)
    if kind == "closed_loop":
        return ArrivalSpec(
            kind="closed_loop", concurrency=_clients(arr, wl, replicas), ramp_up_s=arr.ramp_up_s or 0
        )
    if kind == "trace":
        return ArrivalSpec(kind="trace")
    return ArrivalSpec(kind="poisson", rate_rps=1.0)  # at_once: the times are replaced by 0


def _clients(arr: ArrivalSection, wl: Workload | None, replicas: int) -> int:
    """Closed-loop clients: ``arrival.concurrency``, the workload's, 1 for ``single``, else one per
    replica (as predict reads a concurrency workload that leaves it out)."""
    if arr.concurrency is not None:
        return arr.concurrency
    if wl is not None and wl.scenario == "single":
        return 1
    if wl is not None and wl.concurrency is not None:
        return int(wl.concurrency)
    if wl is not None and wl.scenario == "concurrency":
        return replicas
    raise UserInputError(
        "workload.concurrency is required for closed_loop arrivals", hint="e.g. concurrency: 32"
    )


def _lengths(sc: SimulateScenario) -> tuple[LengthDist, LengthDist]:
    """The length distributions: ``arrival``'s, else fixed at the workload's lengths."""
    arr, wl = _arrival(sc), sc.workload
    given = [arr.input_tokens, arr.output_tokens]
    means = [wl.input_tokens, wl.output_tokens] if wl is not None else [1, 1]  # 1: a trace's own lengths
    dist_in, dist_out = (d or LengthDist(kind="fixed", value=m) for d, m in zip(given, means, strict=True))
    return dist_in, dist_out


def requests_planned(sc: SimulateScenario, replicas: int = 1) -> int:
    """How many requests simulate runs (before a trace sets its own count)."""
    arr = _arrival(sc)
    if arr.num_requests is not None:
        return arr.num_requests
    if _kind(sc) != "closed_loop":
        return DEFAULT_NUM_REQUESTS
    clients = _clients(arr, sc.workload, replicas)
    return min(max(DEFAULT_NUM_REQUESTS, REQUESTS_PER_CLIENT * clients), MAX_NUM_REQUESTS)


def traffic(sc: SimulateScenario, trace: Requests | None, replicas: int) -> Traffic:
    """The simulated workload of a document (module docstring), a trace's lengths when it gives them."""
    kind = _kind(sc)
    arrival = _process(sc, kind, replicas)
    dist_in, dist_out = _lengths(sc)
    arr = _arrival(sc)
    spec = WorkloadSpec(
        arrival=arrival,
        input_tokens=dist_in,
        output_tokens=dist_out,
        num_requests=requests_planned(sc, replicas),
        seed=arr.seed,
    )
    if trace is not None:  # the capacity search resamples a trace's lengths under Poisson arrivals
        spec = spec.model_copy(
            update={
                "num_requests": len(trace) if kind == "trace" else spec.num_requests,
                "input_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in np.maximum(trace.input_tokens, 1))
                ),
                "output_tokens": LengthDist(
                    kind="empirical", values=tuple(int(v) for v in trace.output_tokens)
                ),
            }
        )
    default_ramp = kind == "closed_loop" and arr.ramp_up_s is None
    return Traffic(spec=spec, at_once=kind == "at_once", default_ramp=default_ramp)


@dataclass(frozen=True)
class _Deployment:
    """The document's model, GPU and layout, resolved against the catalog."""

    model: ModelSpec
    gpu: GpuSpec
    layout: Layout


def _deployment(sc: SimulateScenario, catalog: Catalog) -> _Deployment:
    model, gpu = get_model(sc.model), deployment_gpu(sc, catalog)
    check_generative(model)  # an encoder has no answer to simulate (as predict and recommend say)
    return _Deployment(model=model, gpu=gpu, layout=deployment_layout(sc, model, gpu))


def _replica(
    sc: SimulateScenario, dep: _Deployment, requests: Requests, cal: Calibration | None
) -> ReplicaModel:
    """The replica, built for ``max_model_len`` (default: the longest request, capped at the model's
    context window); requests longer than that are rejected, as an engine would."""
    longest = int((requests.input_tokens + requests.output_tokens).max())
    context = sc.max_model_len or min(longest, dep.model.max_position_embeddings or longest)
    return ReplicaModel.build(
        dep.model, dep.gpu, dep.layout, context_tokens=context, cal=cal or default_calibration()
    )


def request_cycle_s(
    replica: ReplicaModel, spec: WorkloadSpec, replicas: int, *, prefix_hit_rate: float = 0.0
) -> float:
    """One client's request cycle (E2E) in the analytic closed loop of ``spec``'s clients spread over
    ``replicas``, by Little's law: the ramp that starts them evenly spread (``ArrivalSpec.ramp_up_s``)."""
    clients = spec.arrival.concurrency or 1
    loop = Workload(
        scenario="concurrency",
        input_tokens=max(round(spec.input_tokens.mean_tokens), 0),
        output_tokens=max(round(spec.output_tokens.mean_tokens), 1),
        concurrency=max(clients / replicas, 1.0),
        prefix_cache_hit_rate=min(prefix_hit_rate, 0.999),
    )
    tokens_per_s = replica.run(loop)[2]
    return (loop.concurrency or 1.0) * loop.output_tokens / tokens_per_s if tokens_per_s > 0 else 0.0


def _requests(plan: Traffic, trace: Requests | None) -> Requests:
    requests = generate(plan.spec, trace)
    if plan.at_once:
        return dataclasses.replace(requests, arrival_s=np.zeros(len(requests)))
    return requests


def sla_checks(summary: SimSummary, sla: Sla) -> tuple[LimitCheck, ...]:
    """Each limit of ``sla`` against its simulated statistic (means and P99s, ``LIMIT_STATS``)."""
    checks = []
    for name in sla.given:
        metric, stat = LIMIT_STATS[name]
        measured = getattr(getattr(summary, metric), stat)
        limit = float(getattr(sla, name))
        checks.append(
            LimitCheck(
                limit=name,
                limit_ms=limit,
                measured_ms=measured,
                met=measured is not None and measured <= limit,
            )
        )
    return tuple(checks)


def _check_config(sc: SimulateScenario) -> None:
    if "record_timeline" in sc.simulation.model_fields_set and not sc.simulation.record_timeline:
        raise UserInputError(
            "simulation.record_timeline: false would leave ITL, KV use and the mean batch out of the report",
            hint="remove it (the capacity search's probes never record one)",
        )


def simulate_scenario(
    sc: SimulateScenario,
    catalog: Catalog,
    *,
    base_dir: Path | None,
    cal: Calibration | None = None,
    progress: Progress | None = None,
    uncertainty: Uncertainty | None = None,
) -> SimulationOutcome:
    """Run a simulate scenario (and its capacity search when ``capacity_search`` is set); ``progress``
    receives the share of requests started during the main run; ``uncertainty``: intervals on the summary."""
    _check_config(sc)
    if sc.capacity_search and not sc.sla.has_percentiles:
        raise UserInputError(
            "capacity_search needs a P99 limit in sla", hint="e.g. sla: {ttft_p99_ms: 1000, tpot_p99_ms: 50}"
        )
    trace = _trace(sc, base_dir)
    dep = _deployment(sc, catalog)
    plan = traffic(sc, trace, dep.layout.replicas)
    requests = _requests(plan, trace)
    replica = _replica(sc, dep, requests, cal)
    hit = prefix_hit_rate(sc)  # the workload's (or the simulation section's own)
    if plan.default_ramp:
        ramp_s = request_cycle_s(replica, plan.spec, dep.layout.replicas, prefix_hit_rate=hit)
        requests = dataclasses.replace(requests, closed_loop_ramp_s=ramp_s)
    run_config = sc.simulation.model_copy(update={"prefix_cache_hit_rate": hit})
    result = simulate(replica, requests, run_config, progress=progress)
    summary = summarise(result, slo=sc.sla, warmup_fraction=sc.simulation.warmup_fraction)
    capacity = None
    if sc.capacity_search:
        config = run_config.model_copy(update={"record_timeline": False})
        spec = plan.spec
        probe = spec.model_copy(update={"num_requests": min(spec.num_requests, CAPACITY_SEARCH_MAX_REQUESTS)})
        capacity = max_rate_under_slo(replica, probe, sc.sla, config)
    interval = None if uncertainty is None else simulation_bounds(
        summary=summary, replica=replica, spec=plan.spec, replicas=dep.layout.replicas,
        at_once=plan.at_once, fitted=(cal or default_calibration()).is_fitted(dep.gpu.family),
        uncertainty=uncertainty,
    )  # fmt: skip
    return SimulationOutcome(
        result=result, summary=summary, capacity=capacity, sla=sla_checks(summary, sc.sla), interval=interval
    )

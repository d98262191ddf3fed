"""Predict rows of a finite benchmark run the way the benchmark ran it (``serving_sweeps.csv``).

A load-sweep row states the run: ``--num-prompts N`` prompts, sent either by ``--max-concurrency C``
clients that all start at once (closed loop: a client sends its next prompt when its last one ends)
or at ``--request-rate`` Poisson arrivals. The benchmark reports every request of that run: no
warm-up is dropped, and throughput is completed requests over the run's duration (first send to
last token). So the prediction simulates exactly those N prompts and reads the same statistics:

* TTFT/TPOT/E2E percentiles over requests; TPOT per request = (E2E − TTFT) / (output − 1);
* ITL over every inter-token gap pooled across requests (``core/sim/metrics.py``), cut into the chunks
  the client counted where the engine streamed some tokens with no text (``held_token_share``);
* ``requests_per_s`` / ``output_tokens_per_s`` of the whole server over the run.

A point past saturation of a finite run then comes out as the run measured it (the queue grows for
N prompts and stops), not as an infinite queue. One simulation serves every metric of a load level:
runs are memoised on the row's conditions.
"""

from __future__ import annotations

import math
import re

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_releases import line_name
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, WorkloadSpec, generate
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.predict_server import (
    LATENCY_METRIC,
    THROUGHPUT_METRICS,
    SimulatedRow,
    statistic,
    throughput,
)
from gpuplan.usecases.validation.run_conditions import (
    cached_prompt_share,
    held_token_share,
    launch_limits,
    replayed_after_first_level,
    sample_fits_pool,
)

SEED = 2025
"""One fixed seed: every load level of a sweep sees the same prompt sequence, as a benchmark
replaying its dataset with ``--seed 0`` does."""
_NUM_PROMPTS = re.compile(r"--num-prompts\s+(\d+)")
_SWEEP_CONFIG = SimConfig(record_timeline=True)
"""ITL needs the step timeline (gaps are counted per step)."""
_Run = tuple[SimSummary, int, float, float]
"""A run's summary, replica count, mean answer tokens and utilisation (``sweep_utilisation``)."""
_RUNS: dict[tuple[object, ...], _Run] = {}
_MAX_RUNS = 256
"""Runs kept: a sweep file has a few dozen load levels."""


def finite_prompts(case: Case) -> int | None:
    """The prompts of the row's benchmark run (``--num-prompts N`` in its notes), None if not stated."""
    found = _NUM_PROMPTS.search(case.get("notes"))
    return int(found.group(1)) if found else None


def predict_sweep_case(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """A row of a stated finite run (``finite_prompts``): its metric over a simulation of that run."""
    metric = LATENCY_METRIC.match(case.metric)
    if metric is None and case.metric not in THROUGHPUT_METRICS:
        raise Skip(f"metric {case.metric} is not predicted by the simulator")
    summary, replicas, output_mean, _ = _run(case, model, gpu, cal)
    if metric is not None:
        return statistic(summary, *metric.groups())
    return throughput(case, summary.requests_per_s * replicas, output_mean)


def _conditions(case: Case) -> tuple[tuple[str, str], ...]:
    """The row's fields that decide the run: every field but the one number and its name."""
    return tuple(
        sorted((k, v) for k, v in case.fields.items() if k not in ("id", "raw_id", "metric", "value"))
    )


def sweep_utilisation(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """Served requests/s of the row's run over the replica's saturation rate at its lengths."""
    return _run(case, model, gpu, cal)[3]


def _run(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> _Run:
    """The simulated run of the row's conditions, its replica count and mean answer tokens; memoised
    (the eight metrics of one load level share one run)."""
    key = (_conditions(case), model.id, gpu.id, cal.model_dump_json())
    if key not in _RUNS:
        if len(_RUNS) >= _MAX_RUNS:
            _RUNS.clear()
        _RUNS[key] = _simulate_run(case, model, gpu, cal)
    return _RUNS[key]


def _simulate_run(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> _Run:
    row = SimulatedRow.of(case, model, gpu, cal, any_metric=True)
    prompts = math.ceil((finite_prompts(case) or 1) / row.replicas)
    spec = WorkloadSpec(
        arrival=_arrival(case, row.replicas),
        input_tokens=row.lengths[0],
        output_tokens=row.lengths[1],
        num_requests=max(prompts, 1),
        seed=SEED,
    )
    layout = row.replica.step.layout
    held = held_token_share(case, line_name(layout.engine.name, layout.engine_version))
    result = simulate(row.replica, generate(spec), sweep_config(case, row, prompts))
    summary = summarise(result, held_token_share=held)
    return summary, row.replicas, row.output_mean, summary.requests_per_s / max(row.offline_rps, 1e-12)


def sweep_config(case: Case, row: SimulatedRow, prompts: int) -> SimConfig:
    """The run's engine as its notes state it (``run_conditions``): launch limits over the engine's
    defaults, and the prefix cache holding the replayed sample after the first level (one replica
    only: with several, a prompt may land on another replica than last time)."""
    hit = 0.0
    fits = sample_fits_pool(row.lengths[0], prompts, row.replica.memory.kv_tokens)
    if row.replicas == 1 and replayed_after_first_level(case) and fits:
        hit = cached_prompt_share(row.lengths[0], row.replica.step.engine.block_size_tokens)
    return _SWEEP_CONFIG.model_copy(update={**launch_limits(case), "prefix_cache_hit_rate": hit})


def _arrival(case: Case, replicas: int) -> ArrivalSpec:
    """Closed loop: ``C / replicas`` clients that start together; rate: Poisson at ``rate / replicas``."""
    if case.get("scenario") == "concurrency":
        clients = max(round((case.float_field("concurrency") or 1.0) / replicas), 1)
        return ArrivalSpec(kind="closed_loop", concurrency=clients)
    rate = case.float_field("request_rate")
    if not rate:
        raise Skip("rate row without request_rate")
    return ArrivalSpec(kind="poisson", rate_rps=rate / replicas)

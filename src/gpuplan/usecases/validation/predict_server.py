"""Predict inference rows with the serving simulator: scenarios ``server``, ``rate`` and ``concurrency``.

* throughput rows (``requests_per_s``, ``output_tokens_per_s[_per_gpu]``) of ``server``: the highest
  Poisson rate whose P99s meet the row's ``constraint:`` note (``ttft_p99_ms<=2000; tpot_p99_ms<=200``),
  found by bisection (``sim/capacity.py``), as MLPerf's Server scenario does;
* latency rows (``ttft_ms_p99``, ``tpot_ms_p50``, ``e2e_ms_p99`` …) of ``server``/``rate``: simulated at
  the row's ``request_rate`` and read off at the named statistic;
* ``concurrency`` rows: the simulator's closed loop, C clients each sending its next request when the
  last one finishes (``predict_closed_loop_case``), started spread over one analytic request cycle
  (``ArrivalSpec.ramp_up_s``) so that fixed-length requests do not run in lock-step.

Replicas of a row are identical and MLPerf's harness spreads queries evenly, so one replica is
simulated at ``rate / replicas`` (Poisson thinning keeps it Poisson), or with ``C / replicas``
clients. Rows that name a benchmark dataset (``benchmark=`` in the notes) take its lengths from
``data/validation/server_datasets.yaml``, over any the row states: resampled from its percentiles where the table
has them, else fixed at its means. Rows of a run that sampled a dataset (``dataset=ShareGPT``) resample
that dataset's length shape (``data/validation/run_lengths.yaml``) scaled to their own means. Other rows
run their own lengths fixed, as fixed-length benchmarks do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.sim.capacity import max_rate_under_slo, saturation_requests_per_s
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.datasets import dataset_of, row_lengths, run_length_shape
from gpuplan.usecases.validation.layouts import row_layouts

REQUESTS_PER_RUN = 1200
"""Fewest requests in a run (closed loops of few clients, slow deployments)."""
RUN_DURATION_S = 600.0
"""Server rows are simulated for MLPerf's minimum run length (``*.Server.min_duration = 600000`` ms in
https://github.com/mlcommons/inference/blob/master/loadgen/mlperf.conf), each probe of a throughput
row's capacity search too: with E2E in the tens of seconds (answers of up to 1,024 tokens) the batch
takes a minute or more to fill, and a 1,200-request run (67 s at 17.8 req/s) read P99 TPOT 35 % low
on I0016 because it never reached the steady batch."""
CLOSED_LOOP_REQUESTS_PER_CLIENT = 30
"""Each closed-loop client cycles through ~30 requests: the warm-up share drops the first waves (all
clients prefilling at once) and the rest is steady state."""
MAX_REQUESTS_PER_RUN = 50_000
"""Bound on one latency run (about a second of simulation)."""
WARMUP_FRACTION = 0.2
"""MLPerf runs last 10 minutes, so its percentiles are steady-state: drop the filling phase."""
SEED = 2024
BISECTION_STEPS = 8
"""2^-8 of the bracket (< 0.6 % of the analytic maximum): finer than the rows' own run-to-run spread."""
_CONSTRAINT = re.compile(r"(ttft|tpot|e2e)_p99_ms\s*<=\s*([0-9.]+)")
LATENCY_METRIC = re.compile(r"^(ttft|tpot|itl|e2e)_ms_(mean|p50|p90|p95|p99)$")
THROUGHPUT_METRICS = ("requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu")
_CONFIG = SimConfig(warmup_fraction=WARMUP_FRACTION, record_timeline=False)


def predict_server_case(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """The predicted value of a server/rate row's metric; Skip with the reason when it cannot be predicted."""
    row = SimulatedRow.of(case, model, gpu, cal)
    if row.latency is not None:
        rate = case.float_field("request_rate")
        if not rate:
            raise Skip("latency row without request_rate")
        per_replica = rate / row.replicas
        arrival = ArrivalSpec(kind="poisson", rate_rps=per_replica)
        return statistic(row.run(arrival, math.ceil(per_replica * RUN_DURATION_S)), *row.latency.groups())
    probe = row.workload(
        ArrivalSpec(kind="poisson", rate_rps=1.0), math.ceil(row.offline_rps * RUN_DURATION_S)
    )
    found = max_rate_under_slo(row.replica, probe, _slo(case), _CONFIG, steps=BISECTION_STEPS)
    if not found.feasible:
        raise Skip(found.reason or "infeasible")
    return throughput(case, found.rate_rps * row.replicas, row.output_mean)


def predict_offline_dataset_case(
    case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration
) -> float | None:
    """An ``offline`` throughput row of a benchmark whose length distribution the dataset table holds
    (MLPerf Offline): the simulated engine's saturation rate on requests drawn from it; None for other
    rows (the analytic offline model prices them). Mixed lengths are not their means: a batch of long
    and short answers holds its KV and refills unevenly (llama2-70b on 8x H100-SXM, I0013: 5.7 % below
    the analytic model at the mean lengths)."""
    table = dataset_of(case)
    if table is None or table.distributions() is None or case.metric not in THROUGHPUT_METRICS:
        return None
    row = SimulatedRow.of(case, model, gpu, cal)
    probe = row.workload(ArrivalSpec(kind="poisson", rate_rps=1.0), REQUESTS_PER_RUN)
    per_replica = saturation_requests_per_s(row.replica, probe, _CONFIG)
    return throughput(case, per_replica * row.replicas, row.output_mean)


def predict_closed_loop_case(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """A ``concurrency`` row: ``C / replicas`` closed-loop clients on one simulated replica, the first
    ``WARMUP_FRACTION`` of requests (the first waves, all prefilling at once) left out."""
    row = SimulatedRow.of(case, model, gpu, cal)
    clients = max(round((case.float_field("concurrency") or 1.0) / row.replicas), 1)
    arrival = ArrivalSpec(kind="closed_loop", concurrency=clients, ramp_up_s=row.cycle_s(clients))
    summary = row.run(arrival, CLOSED_LOOP_REQUESTS_PER_CLIENT * clients)
    if row.latency is not None and is_llmperf_itl(case):
        return statistic(summary, "e2e", row.latency.group(2)) / row.output_mean
    if row.latency is not None:
        return statistic(summary, *row.latency.groups())
    return throughput(case, summary.requests_per_s * row.replicas, row.output_mean)


@dataclass(frozen=True)
class SimulatedRow:
    """What every simulated row needs: its metric, mean lengths and their distributions, one replica and
    the replica count."""

    latency: re.Match[str] | None
    mean: Workload
    """Mean lengths, as the analytic model takes them (offline)."""
    lengths: tuple[LengthDist, LengthDist]
    replica: ReplicaModel
    replicas: int

    @classmethod
    def of(
        cls, case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration, *, any_metric: bool = False
    ) -> SimulatedRow:
        """``any_metric``: a run shared by every metric of the row's load (no metric check)."""
        latency = LATENCY_METRIC.match(case.metric)
        if not any_metric and case.metric not in THROUGHPUT_METRICS and latency is None:
            raise Skip(f"metric {case.metric} is not predicted by the simulator")
        inp, out = row_lengths(case)
        lengths = _row_distributions(case, inp, out)
        mean = Workload(scenario="offline", input_tokens=inp, output_tokens=out)
        longest = max(lengths[0].values or (inp,)) + max(lengths[1].values or (out,))
        replica, replicas = _replica(case, model, gpu, cal, mean, longest)
        return cls(latency, mean, lengths, replica, replicas)

    @property
    def offline_rps(self) -> float:
        """One replica's analytic offline maximum at the row's mean lengths, requests/s."""
        return self.replica.run(self.mean)[2] / self.mean.output_tokens

    @property
    def output_mean(self) -> float:
        """Mean answer tokens of the simulated requests (what a request rate converts with)."""
        return self.lengths[1].mean_tokens

    def workload(self, arrival: ArrivalSpec, requests: int) -> WorkloadSpec:
        """The row's lengths, ``requests`` clamped to [REQUESTS_PER_RUN, MAX_REQUESTS_PER_RUN]."""
        return WorkloadSpec(
            arrival=arrival,
            input_tokens=self.lengths[0],
            output_tokens=self.lengths[1],
            num_requests=min(max(REQUESTS_PER_RUN, requests), MAX_REQUESTS_PER_RUN),
            seed=SEED,
        )

    def cycle_s(self, clients: int) -> float:
        """One client's request cycle (E2E) in the analytic closed loop, by Little's law: the ramp that
        starts ``clients`` evenly spread over it (``ArrivalSpec.ramp_up_s``)."""
        loop = self.mean.model_copy(update={"scenario": "concurrency", "concurrency": float(clients)})
        tokens_per_s = self.replica.run(loop)[2]
        return clients * loop.output_tokens / tokens_per_s if tokens_per_s > 0 else 0.0

    def run(self, arrival: ArrivalSpec, requests: int) -> SimSummary:
        run = simulate(self.replica, generate(self.workload(arrival, requests)), _CONFIG)
        return summarise(run, warmup_fraction=WARMUP_FRACTION)


def _row_distributions(case: Case, inp: int, out: int) -> tuple[LengthDist, LengthDist]:
    """The lengths a row's run sampled: its MLPerf dataset's percentiles, else the shape of the dataset
    its sweep sampled scaled to its means, else its own lengths fixed (a fixed-length benchmark)."""
    table = dataset_of(case)
    from_table = table.distributions() if table is not None else None
    if from_table is not None:
        return from_table
    shape = run_length_shape(case)
    if shape is not None:
        return shape.scaled_to(inp, out)
    return LengthDist(kind="fixed", value=max(inp, 1)), LengthDist(kind="fixed", value=out)


def is_llmperf_itl(case: Case) -> bool:
    """A ``tpot_ms_*`` row transcribed from llmperf's "inter-token latency" (same statistic). llmperf sums every gap
    between streamed chunks *including the first* (the TTFT) and divides by the output tokens
    (``token_benchmark_ray.py``: ``INTER_TOKEN_LAT /= num_output_tokens``), so it reads E2E / tokens,
    not (E2E − TTFT) / (tokens − 1); the row is predicted the way the source computed it."""
    notes = case.get("notes")
    stat = case.metric.removeprefix("tpot_ms_")
    return (
        case.metric.startswith("tpot_ms_") and "llmperf" in notes and f"source metric itl_ms_{stat}" in notes
    )


def throughput(case: Case, requests_per_s: float, out: float) -> float:
    """A throughput metric of the whole deployment from its request rate."""
    gpus = case.int_field("num_gpus") or 1
    return {
        "requests_per_s": requests_per_s,
        "output_tokens_per_s": requests_per_s * out,
        "output_tokens_per_s_per_gpu": requests_per_s * out / gpus,
    }[case.metric]


def parse_constraint(notes: str) -> Sla:
    """``constraint: ttft_p99_ms<=2000; tpot_p99_ms<=200`` → Sla; Skip when absent or unknown."""
    head = notes.split("|", 1)[0]
    if "constraint:" not in head:
        raise Skip("no latency constraint in the notes")
    limits = {f"{name}_p99_ms": float(value) for name, value in _CONSTRAINT.findall(head)}
    if not limits:
        raise Skip(f"latency constraint not machine-readable: {head.strip()}")
    return Sla(**limits)


def _slo(case: Case) -> Sla:
    return parse_constraint(case.get("notes"))


def _replica(
    case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration, offline: Workload, context: int
) -> tuple[ReplicaModel, int]:
    """One replica of the row, built for requests of up to ``context`` tokens, and how many replicas run.
    TP given: that one; else the layout with the highest analytic ``offline`` throughput of the whole
    row, the rule of the analytic rows (a submitter tunes the layout for throughput; the smallest TP
    that fits overloads at the row's rate)."""
    last = "no layout divides the GPU count"
    best: tuple[float, ReplicaModel, int] | None = None
    for layout in row_layouts(case, model):
        try:
            one = layout.model_copy(update={"replicas": 1})  # simulated alone at rate / replicas
            replica = ReplicaModel.build(model, gpu, one, context_tokens=context, cal=cal)
        except GpuplanError as exc:
            last = exc.one_line()
            continue
        tokens_per_s = replica.run(offline)[2] * layout.replicas
        if best is None or tokens_per_s > best[0]:
            best = (tokens_per_s, replica, layout.replicas)
    if best is None:
        raise Skip(last)
    return best[1], best[2]


def statistic(summary: SimSummary, name: str, stat: str) -> float:
    dist = {"ttft": summary.ttft, "tpot": summary.tpot, "itl": summary.itl, "e2e": summary.e2e}[name]
    value = getattr(dist, f"{stat}_ms")
    if value is None or summary.truncated:
        raise Skip(f"simulation did not reach a steady state ({summary.truncated or 'no completed request'})")
    return float(value)

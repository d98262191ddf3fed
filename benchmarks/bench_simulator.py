"""Time the serving simulator: 10,000 requests, Llama-3.1-8B on one H100-SXM, Poisson at 80 % of capacity.

Capacity is the analytic offline maximum (perf/scenarios.py) for 1,024-token prompts and 256-token
answers. Prints requests, wall seconds (best of ``REPEATS``) and events per second. Target: <= 0.5 s.
Run: ``PYTHONPATH=src python3 benchmarks/bench_simulator.py``.
"""

from __future__ import annotations

import time

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.data.bundled_calibration import default_calibration

REQUESTS = 10_000
LOAD = 0.8
REPEATS = 3
INPUT_TOKENS, OUTPUT_TOKENS = 1024, 256
TARGET_S = 0.5


def main() -> None:
    model, gpu = get_model("meta-llama/Llama-3.1-8B"), load_catalog().get_gpu("H100-SXM")
    replica = ReplicaModel.build(
        model, gpu, Layout(), context_tokens=INPUT_TOKENS + OUTPUT_TOKENS, cal=default_calibration()
    )
    spec = WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=1.0),
        input_tokens=LengthDist(value=INPUT_TOKENS),
        output_tokens=LengthDist(value=OUTPUT_TOKENS),
        num_requests=REQUESTS,
    )
    rate = LOAD * offline_requests_per_s(replica, spec)
    requests = generate(spec.model_copy(update={"arrival": ArrivalSpec(kind="poisson", rate_rps=rate)}))
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = simulate(replica, requests)
        best = min(best, time.perf_counter() - start)
    summary = summarise(result)
    print(
        f"rate {rate:.2f} req/s (80 % of the analytic offline maximum), mean batch {summary.mean_batch:.0f}"
    )
    print(f"{'requests':>10} {'wall s':>8} {'events':>8} {'events/s':>10} {'target s':>9}")
    print(f"{REQUESTS:>10,} {best:>8.3f} {result.events:>8,} {result.events / best:>10,.0f} {TARGET_S:>9}")


if __name__ == "__main__":
    main()

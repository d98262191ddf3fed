"""P99 TPOT/TTFT of one replica by simulated run length near saturation (why ``confirm.steady_run_at``).

Run: ``python benchmarks/p99_run_length.py``. Llama-3.1-8B fp8 on one MI300X, 2,048/300 tokens, Poisson
rates 18-20.5 req/s, runs of 800 / 3,200 / 20,000 requests, seeds 7-9; results in benchmarks/README.md.
"""

from __future__ import annotations

import time

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.recommend import confirm
from gpuplan.core.recommend.request import SearchSpace
from gpuplan.core.recommend.search import candidate_layouts, one_replica
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

RATES_RPS = (18.0, 19.0, 20.0, 20.5)
LENGTHS = (800, 3200, 20_000)
SEEDS = (7, 8, 9)


def main() -> None:
    model = get_model("meta-llama/Llama-3.1-8B")
    target = Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=20)
    offer = resolve.offers(default_catalog(), ["MI300X"])[0]
    layout = next(iter(candidate_layouts(model, offer.gpu, SearchSpace(weight_dtypes=("fp8",), max_gpus=1))))
    replica = one_replica(model, offer.gpu, layout, target, default_calibration())
    sla = Sla(ttft_p99_ms=2000, tpot_p99_ms=100)
    for rate in RATES_RPS:
        for requests in LENGTHS:
            start = time.perf_counter()
            cells = []
            for seed in SEEDS:
                spec = confirm.spec(target, rate, requests).model_copy(update={"seed": seed})
                summary = summarise(
                    simulate(replica, generate(spec), confirm.sim_config()),
                    slo=sla,
                    warmup_fraction=confirm.WARMUP_FRACTION,
                )
                cells.append(f"{summary.tpot.p99_ms or 0:.0f}/{summary.ttft.p99_ms or 0:.0f}")
            took = (time.perf_counter() - start) / len(SEEDS)
            print(
                f"{rate:5.1f} req/s {requests:>6} requests  P99 TPOT/TTFT ms {'  '.join(cells)}"
                f"  ({took:.2f} s a run)"
            )


if __name__ == "__main__":
    main()

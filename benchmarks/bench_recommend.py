"""Time a full ``recommend`` sweep: every catalog GPU × 1-64 GPUs × all TP/PP layouts × dtypes.

Run: ``make bench`` (or ``python benchmarks/bench_recommend.py``; ``--p99`` for the P99-limited part
alone, ``--seeds N`` to compare the tail model with N seeds' runs too). Prints a table of wall times
(best of N) and how many layouts were evaluated, then the P99-limited cases: their times, with the load
average (the machine may be shared), and every aggregated plan listed against the simulator. Speed is
measured here, never asserted in tests; results in benchmarks/README.md.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Sequence

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend import confirm, recommend
from gpuplan.core.recommend.request import GpuOffer, Plan, SearchSpace
from gpuplan.core.recommend.search import candidate_layouts, one_replica, search
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.metrics import SimSummary, summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.tail_model import tail_estimate
from gpuplan.core.sim.workload import generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases import resolve

REPEATS = 5
CASES = (
    (
        "meta-llama/Llama-3.1-8B",
        Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=20),
        Sla(ttft_ms=1000, tpot_ms=50),
    ),
    (
        "Qwen/Qwen2.5-32B-Instruct",
        Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=20),
        Sla(ttft_ms=1000, tpot_ms=50),
    ),
    (
        "meta-llama/Llama-3.1-70B",
        Workload(scenario="concurrency", input_tokens=1000, output_tokens=500, concurrency=256),
        Sla(tpot_ms=60),
    ),
    (
        "mistralai/Mixtral-8x7B-v0.1",
        Workload(scenario="rate", input_tokens=1000, output_tokens=500, rate_rps=10),
        Sla(tpot_ms=50),
    ),
)
SPACE = SearchSpace(weight_dtypes=("bf16", "fp8", "int4", "fp4"), max_gpus=64)


def main() -> None:
    catalog = default_catalog()
    cal = default_calibration()
    offers = resolve.offers(catalog, None)
    print(f"{'model':32} {'GPU types':>9} {'layouts':>8} {'plans':>6} {'best s':>8} {'median s':>9}")
    for model_id, target, sla in CASES:
        model = get_model(model_id)
        layouts = sum(len(list(candidate_layouts(model, o.gpu, SPACE))) for o in offers)
        times = []
        plans: list[Plan] = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            plans, _ = search(model, offers, target, sla, SPACE, cal=cal)
            times.append(time.perf_counter() - start)
        print(
            f"{model_id:32} {len(offers):>9} {layouts:>8} {len(plans):>6} {min(times):>8.3f} "
            f"{statistics.median(times):>9.3f}"
        )


P99_CASES = (
    ("meta-llama/Llama-3.1-8B", 20.0),
    ("meta-llama/Llama-3.1-70B", 5.0),
)
P99_SLA = Sla(ttft_p99_ms=2000, tpot_p99_ms=100)
P99_REPEATS = 3


def _uncertainty() -> Uncertainty | None:
    """``--intervals``: plans carry the error model's 80 % intervals; ``--confidence Q``: sized at Q too."""
    args = sys.argv[1:]
    if "--confidence" in args:
        q = float(args[args.index("--confidence") + 1])
        return Uncertainty(model=default_error_model(), confidence=q)
    return Uncertainty(model=default_error_model()) if "--intervals" in args else None


def p99_main() -> None:
    """P99-limited recommend over the whole catalog (no shortlist), timed with the load average, and
    every aggregated plan listed against the simulator (``_p99_table``; issue 16: within 10 %)."""
    catalog, cal = default_catalog(), default_calibration()
    offers, sure = resolve.offers(catalog, None), _uncertainty()
    for model_id, rate in P99_CASES:
        model = get_model(model_id)
        target = Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=rate)
        times, cpu = [], []
        for _ in range(P99_REPEATS):
            start, used = time.perf_counter(), time.process_time()
            rec = recommend(model, offers, target, sla=P99_SLA, space=SPACE, cal=cal, uncertainty=sure)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - used)
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        print(
            f"P99 {model_id} @ {rate:g} req/s: best {min(times):.2f} s, median {statistics.median(times):.2f} s "
            f"(CPU {min(cpu):.2f} s), {len(rec.plans)} plans; load average {load}"
        )
        for plan in [p for p in rec.plans if p.layout_kind == "disaggregated"]:
            print(
                f"  {plan.num_gpus} GPUs {plan.gpu_types} disaggregated [{plan.p99_source}]: P99 TTFT "
                f"{plan.ttft_p99_ms or 0.0:.0f} ms, TPOT {plan.tpot_p99_ms or 0.0:.1f} ms; {plan.p99_pools}"
            )
        _p99_table(model, offers, target, cal, [p for p in rec.plans if p.layout_kind == "aggregated"])


def _seeds() -> int:
    """``--seeds N``: the tail model is also compared with the mean of N seeds' runs (seed 7 first)."""
    args = sys.argv[1:]
    return int(args[args.index("--seeds") + 1]) if "--seeds" in args else 1


def _sim_p99s(
    replica: ReplicaModel, target: Workload, rate: float, seeds: int
) -> tuple[SimSummary, float, float]:
    """The plan's own run (``confirm.steady_run_at``: its seed and length), and the mean P99 TTFT and
    TPOT over ``seeds`` runs of that length (the first is the plan's)."""
    offline = offline_requests_per_s(replica, confirm.spec(target, 1.0))
    own, why = confirm.run_at(replica, target, rate, P99_SLA)
    requests = confirm.TAIL_REQUESTS
    if why is None and rate > confirm.LONG_RUN_UTILISATION * offline:
        requests = confirm.LONG_TAIL_REQUESTS
        own = confirm.run_at(replica, target, rate, P99_SLA, requests)[0]
    runs = [own]
    for k in range(1, seeds):
        spec = confirm.spec(target, rate, requests).model_copy(update={"seed": confirm.SEED + k})
        result = simulate(replica, generate(spec), confirm.sim_config())
        runs.append(summarise(result, slo=P99_SLA, warmup_fraction=confirm.WARMUP_FRACTION))
    ttft = statistics.fmean(r.ttft.p99_ms or 0.0 for r in runs)
    return own, ttft, statistics.fmean(r.tpot.p99_ms or 0.0 for r in runs)


def _p99_table(
    model: ModelSpec, offers: Sequence[GpuOffer], target: Workload, cal: Calibration, plans: Sequence[Plan]
) -> None:
    """One row per aggregated plan listed: its P99s (``p99_source``), the tail model's and the
    simulator's at its per-replica rate and run length; ``p/s`` the plan's over the simulator's, ``m/s``
    the tail model's, ``m/N`` the tail model's over the mean of ``--seeds N`` runs; then the worst
    ratios (furthest from 1) of the case."""
    seeds = _seeds()
    print(
        f"  {'plan':34} {'source':10} {'req/s':>6} {'util':>5} | {'TTFT plan':>9} {'model':>6} {'sim':>6} "
        f"{'p/s':>5} {'m/s':>5} {f'm/{seeds}':>5} | {'TPOT plan':>9} {'model':>6} {'sim':>6} {'p/s':>5} "
        f"{'m/s':>5} {f'm/{seeds}':>5}"
    )
    worst = {"plan": [1.0], "model": [1.0], "mean": [1.0]}
    rate = target.rate_rps or 0.0
    for plan in plans:
        offer = next(o for o in offers if o.gpu.id == plan.gpu)
        replica = one_replica(model, offer.gpu, plan.layout, target, cal)
        per = rate / plan.layout.replicas
        shape = {"input_tokens": target.input_tokens, "output_tokens": target.output_tokens}
        est = tail_estimate(replica, **shape, rate_rps=per)
        sim, mean_ttft, mean_tpot = _sim_p99s(replica, target, per, seeds)
        offline = offline_requests_per_s(replica, confirm.spec(target, 1.0))
        cells = []
        for mine, model_ms, sim_ms, mean_ms in (
            (plan.ttft_p99_ms or 0.0, est.ttft_p99_ms, sim.ttft.p99_ms or math.inf, mean_ttft),
            (plan.tpot_p99_ms or 0.0, est.tpot_p99_ms, sim.tpot.p99_ms or math.inf, mean_tpot),
        ):
            ratios = (mine / sim_ms, model_ms / sim_ms, model_ms / mean_ms)
            for key, r in zip(worst, ratios, strict=True):
                worst[key].append(r)
            cells.append(
                f"{mine:>9.1f} {model_ms:>6.1f} {sim_ms:>6.1f} {ratios[0]:>5.2f} {ratios[1]:>5.2f} {ratios[2]:>5.2f}"
            )
        name = f"{plan.layout.num_gpus}x{plan.gpu} {plan.layout.replica_label}"
        print(
            f"  {name:34} {plan.p99_source or '':10} {per:>6.2f} {per / offline:>5.2f} | {cells[0]} | {cells[1]}"
        )
    far = {k: max(v, key=lambda r: abs(math.log(r)) if r > 0 else math.inf) for k, v in worst.items()}
    print(
        f"  worst over {len(plans)} aggregated plans: plan/sim {far['plan']:.2f}, model/sim {far['model']:.2f}, "
        f"model/mean of {seeds} seeds {far['mean']:.2f}"
    )


if __name__ == "__main__":
    if "--p99" not in sys.argv[1:]:
        main()
    p99_main()

"""Time a full ``recommend`` sweep: every catalog GPU × 1-64 GPUs × all TP/PP layouts × dtypes.

Run: ``make bench`` (or ``python benchmarks/bench_recommend.py``; ``--p99`` for the P99-limited part
alone). Prints a table of wall times (best of N) and how many layouts were evaluated, then the
P99-limited cases. Speed is measured here, never asserted in tests; results in benchmarks/README.md.
"""

from __future__ import annotations

import statistics
import sys
import time

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.recommend import confirm, recommend
from gpuplan.core.recommend.request import Plan, SearchSpace
from gpuplan.core.recommend.search import candidate_layouts, one_replica, search
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.tail_model import tail_estimate
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
P99_REPEATS = 2


def _uncertainty() -> Uncertainty | None:
    """``--intervals``: plans carry the error model's 80 % intervals; ``--confidence Q``: sized at Q too."""
    args = sys.argv[1:]
    if "--confidence" in args:
        q = float(args[args.index("--confidence") + 1])
        return Uncertainty(model=default_error_model(), confidence=q)
    return Uncertainty(model=default_error_model()) if "--intervals" in args else None


def p99_main() -> None:
    """P99-limited recommend over the whole catalog (no shortlist), and for the top plans their P99s
    (and where they came from: ``p99_source``) against the tail model's and a simulator run at the
    plan's per-replica rate, as long as the plan's own confirmation ran (20,000 requests near
    saturation, ``confirm.steady_run_at``); ``plan/sim`` is the plan's P99 over the simulator's."""
    catalog, cal = default_catalog(), default_calibration()
    offers, sure = resolve.offers(catalog, None), _uncertainty()
    for model_id, rate in P99_CASES:
        model = get_model(model_id)
        target = Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=rate)
        times = []
        for _ in range(P99_REPEATS):
            start = time.perf_counter()
            rec = recommend(model, offers, target, sla=P99_SLA, space=SPACE, cal=cal, uncertainty=sure)
            times.append(time.perf_counter() - start)
        print(f"P99 {model_id} @ {rate:g} req/s: best {min(times):.2f} s, {len(rec.plans)} plans")
        split = [p for p in rec.plans if p.layout_kind == "disaggregated"]
        for plan in split[:2]:
            print(
                f"  {plan.num_gpus} GPUs {plan.gpu_types} disaggregated [{plan.p99_source}]: P99 TTFT "
                f"{plan.ttft_p99_ms or 0.0:.0f} ms, TPOT {plan.tpot_p99_ms or 0.0:.1f} ms; {plan.p99_pools}"
            )
        for plan in [p for p in rec.plans if p.layout_kind == "aggregated"][:3]:
            offer = next(o for o in offers if o.gpu.id == plan.gpu)
            replica = one_replica(model, offer.gpu, plan.layout, target, cal)
            per = rate / plan.layout.replicas
            est = tail_estimate(replica, input_tokens=2048, output_tokens=300, rate_rps=per)
            offline = offline_requests_per_s(replica, confirm.spec(target, 1.0))
            sim, _ = confirm.steady_run_at(replica, target, per, P99_SLA, offline)  # the plan's run length
            ttft, tpot = plan.ttft_p99_ms or 0.0, plan.tpot_p99_ms or 0.0
            sim_ttft, sim_tpot = sim.ttft.p99_ms or 0.0, sim.tpot.p99_ms or 0.0
            print(
                f"  {plan.layout.num_gpus}x{plan.gpu} {plan.layout.replica_label} at {per:.2f} req/s/replica "
                f"[{plan.p99_source}]: TTFT plan {ttft:.0f} model {est.ttft_p99_ms:.0f} sim {sim_ttft:.0f} ms "
                f"(plan/sim {ttft / sim_ttft:.2f}), TPOT plan {tpot:.1f} model {est.tpot_p99_ms:.1f} "
                f"sim {sim_tpot:.1f} ms (plan/sim {tpot / sim_tpot:.2f})"
            )


if __name__ == "__main__":
    if "--p99" not in sys.argv[1:]:
        main()
    p99_main()

"""The analytic closed loop (``perf/closed_loop.py``, scenario ``concurrency``) against the simulator's.

Both model C clients spread over their request cycle; the simulator starts them with
``ramp_up_s`` = one analytic cycle and drops the first 20 % of requests. For each configuration the
table prints TTFT, TPOT and output tokens/s from both and their ratio (analytic / simulated), plus
the analytic offline maximum for reference. Offline still uses the wave model, so a loop that mixes
prompt chunks into decode steps can beat it (see docs/model.md §6).

Run: ``PYTHONPATH=src python3 benchmarks/compare_closed_loop.py`` (a few seconds).
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

REQUESTS_PER_CLIENT = 30
WARMUP_FRACTION = 0.2
CASES: tuple[tuple[str, str, Layout, int, int, int], ...] = (
    ("meta-llama/Llama-3.1-8B", "H100-SXM", Layout(engine="vllm"), 512, 128, 64),
    ("meta-llama/Llama-3.1-8B", "H100-SXM", Layout(engine="vllm"), 4096, 64, 8),
    ("meta-llama/Llama-3.1-8B", "H100-SXM", Layout(engine="vllm"), 4096, 64, 64),
    ("meta-llama/Llama-3.1-8B", "H100-SXM", Layout(engine="vllm"), 2048, 128, 64),
    ("meta-llama/Meta-Llama-3-8B", "A10G", Layout(engine="trtllm"), 550, 150, 16),
    ("meta-llama/Meta-Llama-3-8B", "A10G", Layout(engine="trtllm"), 2048, 128, 16),
    ("Qwen/Qwen2.5-0.5B-Instruct", "H100-SXM", Layout(engine="vllm"), 20000, 50, 128),
    ("mistralai/Mixtral-8x7B-v0.1", "H100-SXM", Layout(engine="vllm", tp=2), 1024, 128, 256),
    ("deepseek-ai/DeepSeek-V2-Lite", "L40S", Layout(engine="vllm"), 4000, 200, 88),
)


def _row(model_id: str, gpu_id: str, layout: Layout, inp: int, out: int, clients: int) -> str:
    model, gpu = get_model(model_id), default_catalog().get_gpu(gpu_id)
    replica = ReplicaModel.build(model, gpu, layout, context_tokens=inp + out, cal=default_calibration())
    loop = Workload(scenario="concurrency", input_tokens=inp, output_tokens=out, concurrency=clients)
    ttft_s, tpot_s, tokens_per_s, running = replica.run(loop)
    offline = replica.run(loop.model_copy(update={"scenario": "offline", "concurrency": None}))[2]
    arrival = ArrivalSpec(kind="closed_loop", concurrency=clients, ramp_up_s=running * out / tokens_per_s)
    spec = WorkloadSpec(
        arrival=arrival,
        input_tokens=LengthDist(value=inp),
        output_tokens=LengthDist(value=out),
        num_requests=REQUESTS_PER_CLIENT * clients,
    )
    sim = summarise(simulate(replica, generate(spec)), warmup_fraction=WARMUP_FRACTION)
    sim_ttft, sim_tpot = sim.ttft.mean_ms or float("nan"), sim.tpot.mean_ms or float("nan")
    name = f"{model_id.split('/')[-1][:18]} {gpu_id} {layout.engine} tp{layout.tp} {inp}/{out} C={clients}"
    return (
        f"{name:54} {ttft_s * 1e3:>8.1f} {sim_ttft:>8.1f} {ttft_s * 1e3 / sim_ttft:>5.2f} "
        f"{tpot_s * 1e3:>7.2f} {sim_tpot:>7.2f} {tpot_s * 1e3 / sim_tpot:>5.2f} "
        f"{tokens_per_s:>8.0f} {sim.output_tokens_per_s:>8.0f} {tokens_per_s / sim.output_tokens_per_s:>5.2f} "
        f"{offline:>8.0f}"
    )


def main() -> None:
    print(
        f"{'configuration':54} {'TTFT ms':>8} {'sim':>8} {'ratio':>5} {'TPOT ms':>7} {'sim':>7} {'ratio':>5} "
        f"{'tok/s':>8} {'sim':>8} {'ratio':>5} {'offline':>8}"
    )
    for case in CASES:
        print(_row(*case))


if __name__ == "__main__":
    main()

"""The analytic tail model against first principles and the simulator (``core/sim/tail_model.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import ReleaseFactors
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.search import one_replica
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.tail_model import tail_estimate, tail_max_rate
from gpuplan.core.sim.tail_prefill import md1_wait_p99_s
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, Requests, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

IN, OUT = 2048, 300
TOLERANCE = 0.10
"""Issue 16: the tail model's P99s within 10 % of the simulator's."""
GRID_REQUESTS = 8000
GRID_SEEDS = (1, 2)
"""The simulator's P99 as the mean of two 8,000-request runs (6,400 after the warm-up each): near
saturation one 800-request run moves its P99 by 10-20 % from seed to seed, two long ones by a few %."""
LLAMA_8B, LLAMA_70B = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"
GRID = [
    # prompts in steps of four (8,192-token budget): later prompts packed into a prompt's step
    (LLAMA_8B, "H100-SXM", 1, "fp8", IN, OUT, 0.5),
    (LLAMA_8B, "MI300X", 1, "fp8", IN, OUT, 0.7),
    (LLAMA_70B, "H200-SXM", 2, "fp4", IN, OUT, 0.3),
    (LLAMA_70B, "H200-SXM", 2, "fp4", IN, OUT, 0.7),
    (LLAMA_70B, "B200", 1, "fp4", IN, OUT, 0.85),
    (LLAMA_70B, "GH200", 1, "fp4", IN, OUT, 0.5),
    (LLAMA_70B, "MI300X", 1, "fp8", IN, OUT, 0.6),
    ("Qwen/Qwen2.5-32B-Instruct", "H100-SXM", 2, "fp8", IN, OUT, 0.6),
    (LLAMA_8B, "H100-SXM", 1, "fp8", 8000, 500, 0.6),
    # one prompt a step or less (2,048-token budget): one later prompt fills its last step
    (LLAMA_8B, "L4", 1, "fp8", IN, OUT, 0.7),
    (LLAMA_8B, "A100-80GB-SXM", 1, "bf16", IN, OUT, 0.85),
    (LLAMA_8B, "RTX-A5000", 2, "fp8", IN, OUT, 0.5),
    (LLAMA_70B, "A100-80GB-SXM", 4, "int4", IN, OUT, 0.5),
]
"""A representative set of the grid measured in docs/simulator.md ("Capacity search"): both prefill
regimes, 8B to 70B, 0.3-0.85 of the offline rate."""


def _replica(
    gpu: str, dtype: str, model_id: str = LLAMA_8B, tp: int = 1, lengths: tuple[int, int] = (IN, OUT)
) -> ReplicaModel:
    offer = resolve.offers(default_catalog(), [gpu])[0]
    target = Workload(scenario="rate", input_tokens=lengths[0], output_tokens=lengths[1], rate_rps=1)
    layout = Layout(tp=tp, weight_dtype=dtype)
    return one_replica(get_model(model_id), offer.gpu, layout, target, default_calibration())


@pytest.fixture(scope="module")
def h100() -> ReplicaModel:
    return _replica("H100-SXM", "fp8")


def _spec(rate: float, lengths: tuple[int, int], requests: int = 1000, seed: int = 0) -> WorkloadSpec:
    return WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=rate),
        input_tokens=LengthDist(kind="fixed", value=lengths[0]),
        output_tokens=LengthDist(kind="fixed", value=lengths[1]),
        num_requests=requests,
        seed=seed,
    )


def _offline(replica: ReplicaModel, lengths: tuple[int, int] = (IN, OUT)) -> float:
    return offline_requests_per_s(replica, _spec(1.0, lengths))


def _sim(replica: ReplicaModel, rate: float, seed: int, lengths: tuple[int, int]) -> tuple[float, float]:
    spec = _spec(rate, lengths, GRID_REQUESTS, seed)
    s = summarise(simulate(replica, generate(spec), SimConfig(record_timeline=False)), warmup_fraction=0.2)
    return s.ttft.p99_ms or 0.0, s.tpot.p99_ms or 0.0


def test_light_load_is_the_lone_request(h100: ReplicaModel) -> None:
    lone = tail_estimate(h100, input_tokens=IN, output_tokens=OUT, rate_rps=0.0)
    assert lone.ttft_p99_ms == pytest.approx(h100.step.lone_prefill_s(IN) * 1000)
    assert lone.tpot_p99_ms == pytest.approx(h100.step.decode_s(batch=1, context=IN + OUT / 2) * 1000)


def test_light_load_of_a_release_with_host_time_is_its_simulated_lone_request() -> None:
    # vLLM 0.14 with 50 ms of host time per request: alone, the first token comes after the host time,
    # the step's planning (nothing to hide it behind) and the prefill, in the simulator and the model
    lines = {"vllm-v1": ReleaseFactors(first_token_host_s=0.05)}
    cal = default_calibration().model_copy(update={"release_lines": lines})
    model, gpu = get_model("meta-llama/Llama-3.1-8B"), default_catalog().get_gpu("H100-SXM")
    replica = ReplicaModel.build(
        model, gpu, Layout(engine_version="0.14.1"), context_tokens=IN + OUT, cal=cal
    )
    lone = tail_estimate(replica, input_tokens=IN, output_tokens=OUT, rate_rps=0.0)
    trace = Requests(np.array([0.0]), np.array([IN]), np.array([OUT]))
    run = simulate(replica, trace)
    assert lone.ttft_p99_ms == pytest.approx((run.first_token_s[0] - run.arrival_s[0]) * 1000, rel=1e-9)


def test_md1_wait_matches_lindley_recursion() -> None:
    rng = np.random.default_rng(1)
    for rho in (0.2, 0.5, 0.8):
        gaps = rng.exponential(1 / rho, 200_000)
        wait = np.zeros(gaps.size)
        for i in range(1, gaps.size):
            wait[i] = max(wait[i - 1] + 1.0 - gaps[i], 0.0)
        assert md1_wait_p99_s(rate_rps=rho, service_s=1.0) == pytest.approx(np.percentile(wait, 99), rel=0.05)


def test_p99s_rise_with_the_rate_and_the_capacity_bound_holds(h100: ReplicaModel) -> None:
    cap = _offline(h100)
    rates = np.linspace(0.05, 0.9, 8) * cap
    ests = [tail_estimate(h100, input_tokens=IN, output_tokens=OUT, rate_rps=r) for r in rates]
    assert all(
        a.ttft_p99_ms <= b.ttft_p99_ms and a.tpot_p99_ms <= b.tpot_p99_ms for a, b in itertools.pairwise(ests)
    )
    loose = tail_max_rate(
        h100, input_tokens=IN, output_tokens=OUT, slo=Sla(ttft_p99_ms=3.6e6, tpot_p99_ms=6e5)
    )
    assert 0 < loose <= 1.5 * cap  # never past the stability limits, whatever the SLO


@pytest.mark.parametrize(("model_id", "gpu", "tp", "dtype", "prompt", "answer", "share"), GRID)
def test_tail_model_agrees_with_the_simulator(
    model_id: str, gpu: str, tp: int, dtype: str, prompt: int, answer: int, share: float
) -> None:
    """P99 TTFT and TPOT of one replica at ``share`` of its offline rate within 10 % of the simulator's
    (the mean of ``GRID_SEEDS`` runs of ``GRID_REQUESTS`` requests)."""
    lengths = (prompt, answer)
    replica = _replica(gpu, dtype, model_id, tp, lengths)
    rate = share * _offline(replica, lengths)
    est = tail_estimate(replica, input_tokens=prompt, output_tokens=answer, rate_rps=rate)
    sims = [_sim(replica, rate, seed, lengths) for seed in GRID_SEEDS]
    ttft, tpot = (float(np.mean(v)) for v in zip(*sims, strict=True))
    assert est.ttft_p99_ms == pytest.approx(ttft, rel=TOLERANCE)
    assert est.tpot_p99_ms == pytest.approx(tpot, rel=TOLERANCE)

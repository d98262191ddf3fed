"""The analytic tail model against first principles and the simulator (``core/sim/tail_model.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.search import one_replica
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.tail_model import md1_wait_p99_s, tail_estimate, tail_max_rate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, generate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

IN, OUT = 2048, 300
TPOT_TOLERANCE = 0.15
"""Measured over 8B/70B on H100, MI300X, A100, L4, T4 at 5-90 % of capacity: TPOT within ~10 %, plus
the ~5 % seed-to-seed spread of a P99 of 640 requests."""
TTFT_TOLERANCE = 0.35
"""TTFT is the looser one: the model's M/D/1 prefill queue runs 10-25 % under the simulator at
30-80 % load, and a P99 of 640 requests moves ~10 % from seed to seed."""


def _replica(gpu: str, dtype: str) -> ReplicaModel:
    offer = resolve.offers(default_catalog(), [gpu])[0]
    target = Workload(scenario="rate", input_tokens=IN, output_tokens=OUT, rate_rps=1)
    model = get_model("meta-llama/Llama-3.1-8B")
    return one_replica(model, offer.gpu, Layout(tp=1, weight_dtype=dtype), target, default_calibration())


@pytest.fixture(scope="module")
def h100() -> ReplicaModel:
    return _replica("H100-SXM", "fp8")


def _offline(replica: ReplicaModel) -> float:
    spec = WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=1.0),
        input_tokens=LengthDist(kind="fixed", value=IN),
        output_tokens=LengthDist(kind="fixed", value=OUT),
    )
    return offline_requests_per_s(replica, spec)


def _sim(replica: ReplicaModel, rate: float, seed: int) -> tuple[float, float]:
    spec = WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=rate),
        input_tokens=LengthDist(kind="fixed", value=IN),
        output_tokens=LengthDist(kind="fixed", value=OUT),
        num_requests=800,
        seed=seed,
    )
    s = summarise(simulate(replica, generate(spec), SimConfig(record_timeline=False)), warmup_fraction=0.2)
    return s.ttft.p99_ms or 0.0, s.tpot.p99_ms or 0.0


def test_light_load_is_the_lone_request(h100: ReplicaModel) -> None:
    lone = tail_estimate(h100, input_tokens=IN, output_tokens=OUT, rate_rps=0.0)
    assert lone.ttft_p99_ms == pytest.approx(h100.step.lone_prefill_s(IN) * 1000)
    assert lone.tpot_p99_ms == pytest.approx(h100.step.decode_s(batch=1, context=IN + OUT / 2) * 1000)


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


@pytest.mark.parametrize(
    ("gpu", "dtype", "share"), [("H100-SXM", "fp8", 0.3), ("H100-SXM", "fp8", 0.7), ("L4", "fp8", 0.5)]
)
def test_tail_model_agrees_with_the_simulator(gpu: str, dtype: str, share: float) -> None:
    replica = _replica(gpu, dtype)
    cap = _offline(replica)
    rate = share * cap
    est = tail_estimate(replica, input_tokens=IN, output_tokens=OUT, rate_rps=rate)
    sims = [_sim(replica, rate, seed) for seed in (1, 2, 3)]
    ttft, tpot = (float(np.mean(v)) for v in zip(*sims, strict=True))
    assert est.ttft_p99_ms == pytest.approx(ttft, rel=TTFT_TOLERANCE)
    assert est.tpot_p99_ms == pytest.approx(tpot, rel=TPOT_TOLERANCE)

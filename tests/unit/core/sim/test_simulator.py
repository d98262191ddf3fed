"""Invariants of the serving simulator: analytic limits, queueing laws, preemption, bounds, seeds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.sim.config import Disaggregation, SimConfig
from gpuplan.core.sim.metrics import summarise
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, Requests, WorkloadSpec, generate
from gpuplan.core.workload import Workload

Builder = Callable[..., ReplicaModel]
SATURATION_TOLERANCE = 0.25
"""Saturated simulated throughput lies in [75 %, 100 %] of the analytic offline maximum: the
simulator admits prompts as they come (small chunks that each pay a weight stream and the step
overhead on top of the decode step), while the analytic model packs prompts into full chunks."""


def poisson(rate: float, n: int, inp: int = 512, out: int = 128, seed: int = 0) -> WorkloadSpec:
    return WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=rate),
        input_tokens=LengthDist(kind="fixed", value=inp),
        output_tokens=LengthDist(kind="fixed", value=out),
        num_requests=n,
        seed=seed,
    )


def test_one_request_at_a_time_equals_the_analytic_single_request(replica: ReplicaModel) -> None:
    inp, out = 700, 90
    trace = Requests(
        np.array([0.0, 500.0, 1000.0]), np.full(3, inp, dtype=np.int64), np.full(3, out, dtype=np.int64)
    )
    result = simulate(replica, trace)
    ttft, tpot, _, _ = replica.run(Workload(scenario="single", input_tokens=inp, output_tokens=out))
    sim_ttft = result.first_token_s - result.arrival_s
    sim_tpot = (result.finish_s - result.first_token_s) / (out - 1)
    assert sim_ttft == pytest.approx([ttft] * 3, rel=1e-12)
    assert sim_tpot == pytest.approx([tpot] * 3, rel=1e-9)
    assert result.finish_s - result.arrival_s == pytest.approx([ttft + (out - 1) * tpot] * 3, rel=1e-9)


def test_littles_law(replica: ReplicaModel) -> None:
    summary = summarise(simulate(replica, generate(poisson(rate=10.0, n=3000))))
    assert summary.completed == 3000
    little = summary.arrival_rate_rps * (summary.e2e.mean_ms or 0.0) / 1000.0
    assert summary.mean_in_system == pytest.approx(little, rel=0.02)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rate=st.floats(min_value=0.5, max_value=40.0),
    inp=st.integers(min_value=1, max_value=3000),
    out=st.integers(min_value=2, max_value=400),
    cv=st.floats(min_value=0.3, max_value=4.0),
)
def test_percentiles_are_ordered(replica: ReplicaModel, rate: float, inp: int, out: int, cv: float) -> None:
    spec = WorkloadSpec(
        arrival=ArrivalSpec(kind="gamma", rate_rps=rate, cv=cv),
        input_tokens=LengthDist(kind="lognormal", mean=inp, std=inp / 2),
        output_tokens=LengthDist(kind="uniform", low=1, high=out),
        num_requests=150,
    )
    summary = summarise(simulate(replica, generate(spec)))
    for dist in (summary.ttft, summary.tpot, summary.itl, summary.e2e, summary.queueing):
        if dist.p50_ms is not None:
            assert dist.p50_ms <= (dist.p90_ms or 0) <= (dist.p95_ms or 0) <= (dist.p99_ms or 0)
    assert summary.completed + summary.rejected == 150


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_throughput_saturates_at_the_analytic_offline_maximum(engine: str, build_replica: Builder) -> None:
    base = build_replica(Layout(engine=engine), context=640)
    replica = ReplicaModel(step=dataclasses.replace(base.step, max_seqs=128), memory=base.memory)
    _, _, offline_tokens_per_s, _ = replica.run(
        Workload(scenario="offline", input_tokens=512, output_tokens=128)
    )
    rates = []
    for clients in (200, 300):
        spec = WorkloadSpec(
            arrival=ArrivalSpec(kind="closed_loop", concurrency=clients),
            input_tokens=LengthDist(value=512),
            output_tokens=LengthDist(value=128),
            num_requests=2500,
        )
        rates.append(summarise(simulate(replica, generate(spec)), warmup_fraction=0.3).output_tokens_per_s)
    for rate in rates:  # saturated: more clients than batch slots, throughput pinned near the maximum
        assert (1 - SATURATION_TOLERANCE) * offline_tokens_per_s <= rate <= offline_tokens_per_s, rates


def test_undersized_kv_preempts_and_still_finishes(build_replica: Builder) -> None:
    small = build_replica(Layout(gpu_memory_utilization=0.3))
    spec = poisson(rate=50.0, n=200, inp=1000, out=1000)
    for mode in ("recompute", "swap"):
        summary = summarise(simulate(small, generate(spec), SimConfig(preemption=mode)))
        assert summary.preemptions > 0
        assert summary.completed == 200
    reserved = summarise(simulate(small, generate(spec), SimConfig(kv_reservation="full")))
    assert reserved.preemptions == 0 and reserved.completed == 200


def test_seeded_runs_are_reproducible(replica: ReplicaModel) -> None:
    a = simulate(replica, generate(poisson(rate=20.0, n=400, seed=7)))
    b = simulate(replica, generate(poisson(rate=20.0, n=400, seed=7)))
    c = simulate(replica, generate(poisson(rate=20.0, n=400, seed=8)))
    assert np.array_equal(a.finish_s, b.finish_s) and a.events == b.events
    assert not np.array_equal(a.finish_s, c.finish_s)


def test_event_and_time_bounds_are_reported(replica: ReplicaModel) -> None:
    capped = simulate(replica, generate(poisson(rate=20.0, n=500)), SimConfig(max_events=100))
    assert capped.events == 100 and capped.truncated and "events" in capped.truncated
    overloaded = simulate(replica, generate(poisson(rate=500.0, n=5000)), SimConfig(max_sim_time_s=5.0))
    assert overloaded.truncated and "simulated time" in overloaded.truncated
    assert summarise(overloaded).truncated == overloaded.truncated


def test_request_larger_than_the_kv_pool_is_rejected(replica: ReplicaModel) -> None:
    huge = int(replica.memory.kv_tokens) + 10
    trace = Requests(
        np.array([0.0, 1.0]), np.array([huge, 100], dtype=np.int64), np.array([10, 10], dtype=np.int64)
    )
    result = simulate(replica, trace)
    assert result.rejected == 1 and np.isfinite(result.finish_s[1]) and result.truncated is None


def test_replicas_router_and_disaggregation_complete_everything(build_replica: Builder) -> None:
    two, three = build_replica(Layout(replicas=2)), build_replica(Layout(replicas=3))
    spec = poisson(rate=30.0, n=600)
    for config in (
        SimConfig(router="round_robin"),
        SimConfig(router="least_loaded", chunked_prefill=False, prefix_cache_hit_rate=0.5),
        SimConfig(disaggregation=Disaggregation(prefill_replicas=1, decode_replicas=2)),
    ):
        result = simulate(three if config.disaggregation else two, generate(spec), config)
        summary = summarise(result)
        assert summary.completed == 600, config
        assert len(result.timelines) == (3 if config.disaggregation else 2)


def test_disaggregation_pools_must_match_the_hardware(build_replica: Builder) -> None:
    config = SimConfig(disaggregation=Disaggregation(prefill_replicas=5, decode_replicas=5))
    with pytest.raises(
        UserInputError, match=r"prefill_replicas \+ decode_replicas = 10, but the hardware holds 1"
    ):
        simulate(build_replica(Layout(replicas=1)), generate(poisson(rate=1.0, n=5)), config)


def test_a_prefill_pool_of_its_own_model(build_replica: Builder) -> None:
    # The same model given as the prefill pool's runs exactly as the one-model deployment of 1P2D; a
    # prefill worker of twice the tensor parallelism computes prompts faster, so TTFT drops.
    spec = generate(poisson(rate=4.0, n=300, inp=2000, out=64))
    config = SimConfig(disaggregation=Disaggregation(prefill_replicas=1, decode_replicas=2))
    one = summarise(simulate(build_replica(Layout(replicas=3)), spec, config))
    same = build_replica(Layout(replicas=1))
    own = summarise(simulate(same, spec, config, prefill=same))
    assert (own.ttft.p99_ms, own.tpot.p99_ms, own.completed) == (one.ttft.p99_ms, one.tpot.p99_ms, 300)
    wide = summarise(simulate(same, spec, config, prefill=build_replica(Layout(tp=2))))
    assert (wide.ttft.p50_ms or 0) < (own.ttft.p50_ms or 0) and wide.completed == 300


def test_prefix_cache_shortens_ttft(replica: ReplicaModel) -> None:
    spec = poisson(rate=5.0, n=200, inp=4000, out=20)
    cold = summarise(simulate(replica, generate(spec)))
    warm = summarise(simulate(replica, generate(spec), SimConfig(prefix_cache_hit_rate=0.8)))
    assert (warm.ttft.p50_ms or 0) < (cold.ttft.p50_ms or 0)


def test_progress_reports_a_rising_share_and_changes_nothing(replica: ReplicaModel) -> None:
    spec = WorkloadSpec(
        arrival=ArrivalSpec(kind="poisson", rate_rps=20.0),
        input_tokens=LengthDist(kind="fixed", value=256),
        output_tokens=LengthDist(kind="fixed", value=64),
        num_requests=2000,
        seed=3,
    )
    requests = generate(spec)
    seen: list[float] = []
    with_bar = simulate(replica, requests, SimConfig(record_timeline=False), progress=seen.append)
    without = simulate(replica, requests, SimConfig(record_timeline=False))
    assert seen, "a run of this size passes the progress interval"
    assert seen == sorted(seen) and seen[0] >= 0.0 and seen[-1] <= 1.0
    assert np.array_equal(with_bar.finish_s, without.finish_s)  # observing does not perturb the run

"""What an engine release changes in the simulated schedule: one step planned ahead (vLLM's async
scheduling from 0.14) and a request's host time before the engine sees it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import ReleaseFactors
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.core.sim.simulator import simulate
from gpuplan.core.sim.workload import Requests
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

HOST_S = 0.05
MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100-SXM"  # the shared fixture's replica (conftest.py)
Builder = Callable[..., ReplicaModel]


def _two_requests(replica: ReplicaModel, late_by_steps: float) -> tuple[np.ndarray, np.ndarray, float]:
    """A long request at 0 and a short one arriving ``late_by_steps`` decode steps after the first's
    first token; the run's step end times, prefill tokens per step, and the second arrival."""
    first = replica.run(Workload(scenario="single", input_tokens=512, output_tokens=200))
    arrival = first[0] + late_by_steps * first[1]
    trace = Requests(np.array([0.0, arrival]), np.array([512, 64]), np.array([200, 8]))
    timeline = simulate(replica, trace).timelines[0]
    return np.asarray(timeline.t_s), np.asarray(timeline.prefill_tokens), arrival


@pytest.mark.parametrize(("version", "steps_later"), [("0.13.0", 1), ("0.14.1", 2)])
def test_a_release_that_plans_ahead_starts_a_new_prompt_one_step_later(
    build_replica: Builder, version: str, steps_later: int
) -> None:
    replica = build_replica(Layout(engine_version=version))
    assert replica.step.schedules_ahead is (version == "0.14.1")
    ends, prefill, arrival = _two_requests(replica, late_by_steps=10.4)
    seen = arrival + replica.step.first_token_host_s  # the engine sees it after its host time
    running_at_arrival = int(np.searchsorted(ends, seen))  # the step in progress when it arrives
    second_prefill = int(np.flatnonzero(prefill)[1])
    assert second_prefill - running_at_arrival == steps_later


def test_an_idle_engine_that_plans_ahead_still_starts_a_lone_prompt_at_once(build_replica: Builder) -> None:
    replica = build_replica(Layout(engine_version="0.14.1"))
    trace = Requests(np.array([0.0, 100.0]), np.array([512, 512]), np.array([50, 50]))
    result = simulate(replica, trace)
    ttft, _, _, _ = replica.run(Workload(scenario="single", input_tokens=512, output_tokens=50))
    assert result.first_token_s - result.arrival_s == pytest.approx([ttft, ttft], rel=1e-12)


def _with_host(host_s: float) -> ReplicaModel:
    lines = {"vllm-v1": ReleaseFactors(first_token_host_s=host_s)}
    cal = default_calibration().model_copy(update={"release_lines": lines})
    model, gpu = get_model(MODEL), load_catalog().get_gpu(GPU)
    return ReplicaModel.build(model, gpu, Layout(engine_version="0.9.2"), context_tokens=4096, cal=cal)


def test_host_time_delays_the_first_token_and_the_last_by_the_same_amount() -> None:
    trace = Requests(np.array([0.0, 30.0]), np.array([700, 700]), np.array([90, 90]))
    hosted, bare = simulate(_with_host(HOST_S), trace), simulate(_with_host(0.0), trace)
    delay = HOST_S * np.ones(2)
    assert hosted.first_token_s - bare.first_token_s == pytest.approx(delay, rel=1e-9)
    assert hosted.finish_s - bare.finish_s == pytest.approx(delay, rel=1e-9)
    lone = _with_host(HOST_S).run(Workload(scenario="single", input_tokens=700, output_tokens=90))
    assert hosted.first_token_s - hosted.arrival_s == pytest.approx([lone[0]] * 2, rel=1e-9)

"""Steady-state serving predictions of a whole deployment, and the replica model they rest on.

A replica's memory (``perf/memory.py``) and step model (``perf/roofline.py``) are built once; each
scenario kind then prices one replica's share of the load: ``single``, ``static_batch``, ``offline``
and ``rate`` in ``perf/scenarios.py``, the closed loop ``concurrency`` in ``perf/closed_loop.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.closed_loop import run_concurrency
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import InferenceMemory, inference_memory
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.perf.scenarios import replica_capacity, run_offline, run_rate, run_single, run_static_batch
from gpuplan.core.units import GIB
from gpuplan.core.workload import ScenarioKind, Workload

ScenarioRun = Callable[[StepModel, InferenceMemory, Workload], tuple[float, float, float, float]]
"""One replica's (TTFT s, TPOT s, output tokens/s, requests running) in one scenario kind."""
SCENARIO_RUNS: dict[ScenarioKind, ScenarioRun] = {
    "single": run_single,
    "static_batch": run_static_batch,
    "concurrency": run_concurrency,
    "offline": run_offline,
    "rate": run_rate,
}


class InferencePrediction(FrozenModel):
    """Predicted latency and throughput of a whole deployment (all replicas)."""

    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    requests_per_s: float
    running_per_replica: float
    num_gpus: int
    memory: InferenceMemory
    bound: Literal["memory", "compute"]


@dataclass(frozen=True)
class ReplicaModel:
    """One replica's memory and step model, built once and queried at many loads (search, bisection)."""

    step: StepModel
    memory: InferenceMemory

    @classmethod
    def build(
        cls,
        model: ModelSpec,
        gpu: GpuSpec,
        layout: Layout,
        *,
        context_tokens: int,
        cal: Calibration,
    ) -> ReplicaModel:
        """InfeasibleError (with the per-GPU need) when one ``context_tokens`` request cannot fit."""
        mem = inference_memory(model, gpu, layout, max_model_len=max(context_tokens, 1))
        if not mem.fits and mem.kv_pool_bytes > 0:
            raise InfeasibleError(
                f"one request of {mem.max_model_len:,} context tokens does not fit the KV cache of "
                f"{layout.gpus_per_replica}x{gpu.id} ({layout.weight_dtype}): only {mem.max_concurrency:.2f} of it "
                f"fits in {mem.kv_pool_bytes / GIB:.1f} GiB per GPU",
                hint="shorten the context, use fp8 KV cache, or add GPUs",
            )
        if not mem.fits:
            need = (mem.weights_bytes + mem.activation_bytes + mem.overhead_bytes) / GIB
            raise InfeasibleError(
                f"{model.id} does not fit on {layout.gpus_per_replica}x{gpu.id} ({layout.weight_dtype}): needs "
                f"{need:.1f} GiB per GPU before KV cache, budget {mem.budget_bytes / GIB:.1f} GiB",
                hint="raise tp/pp, use a smaller weight dtype or a larger GPU",
            )
        return cls(step=StepModel.build(model, gpu, layout, cal), memory=mem)

    def capacity(self, workload: Workload) -> float:
        """Most requests one replica runs at once for this workload (KV and engine limits)."""
        return replica_capacity(self.step, self.memory, workload)

    def run(self, workload: Workload) -> tuple[float, float, float, float]:
        """(TTFT s, TPOT s, output tokens/s of this replica, requests running) for a per-replica workload.
        TTFT includes the request's host time outside the steps and, where the release schedules one
        step ahead and the replica is busy, the one step an arrival waits longer (``first_token_delay_s``)."""
        ttft, tpot, tokens_per_s, running = SCENARIO_RUNS[workload.scenario](self.step, self.memory, workload)
        others = {"rate": running, "concurrency": max(running - 1.0, 0.0)}.get(workload.scenario, 0.0)
        return ttft + first_token_delay_s(self.step, others, tpot), tpot, tokens_per_s, running


def first_token_delay_s(step: StepModel, others: float, tpot_s: float) -> float:
    """What the scenario models leave out of TTFT: the host time outside the steps, and where the release
    plans each step during the previous one: one step more when the engine is busy as the request
    arrives (with probability 1 − e^(−N) for N other requests in the system, as
    ``scenarios.step_boundary_wait_s``), else the step's planning, which nothing hides on an idle engine
    (a lone request, a static batch and an offline queue find it idle or are timed from the run's start).
    A step is ``tpot_s`` times the tokens a step emits (τ under speculative decoding: TPOT = step / τ)."""
    if not step.schedules_ahead:
        return step.first_token_host_s
    step_s = step.step_of_tpot_s(tpot_s)
    busy = 1.0 - math.exp(-others)
    return step.first_token_host_s + busy * step_s + (1.0 - busy) * min(step.overhead_s, step_s)


def predict_inference(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: Workload,
    *,
    cal: Calibration,
    max_model_len: int | None = None,
) -> InferencePrediction:
    """Predict a scenario on ``layout.replicas`` replicas; InfeasibleError if one request cannot fit.

    ``concurrency`` and ``batch_size`` are system-wide and split evenly over the replicas (left out, as
    ``Workload.as_written`` allows: one request per replica). ``max_model_len`` (default: prompt +
    output) is the context the engine is configured for; it sets the activation profile and the
    per-request KV the engine plans for.
    """
    needed = workload.input_tokens + workload.output_tokens
    if max_model_len is not None and max_model_len < needed:
        raise UserInputError(
            f"max_model_len {max_model_len} is shorter than input + output tokens ({needed})",
            hint="raise max_model_len or shorten the workload",
        )
    context = max_model_len or needed
    replica = ReplicaModel.build(model, gpu, layout, context_tokens=context, cal=cal)
    share = workload.model_copy(
        update={
            "concurrency": None
            if workload.concurrency is None
            else max(workload.concurrency / layout.replicas, 1.0),
            "batch_size": None
            if workload.batch_size is None
            else max(workload.batch_size / layout.replicas, 1.0),
            "rate_rps": None if workload.rate_rps is None else workload.rate_rps / layout.replicas,
        }
    )
    ttft, tpot, tokens_per_s, running = replica.run(share)
    total = tokens_per_s * _busy_replicas(workload, layout.replicas)
    e2e = ttft + max(workload.output_tokens - 1, 0) * tpot
    return InferencePrediction(
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        output_tokens_per_s=total,
        output_tokens_per_s_per_gpu=total / layout.num_gpus,
        requests_per_s=total / workload.output_tokens,
        running_per_replica=running,
        num_gpus=layout.num_gpus,
        memory=replica.memory,
        bound=decode_bound(replica.step, running),
    )


def check_generative(model: ModelSpec) -> None:
    """UserInputError for an encoder-only model (no KV cache, no recurrent state): it does not generate."""
    if not model.kv_groups and model.recurrent_state_bytes == 0:
        raise UserInputError(
            f"{model.id} is an encoder-only model: it does not generate tokens, so it has no TTFT/TPOT to plan",
            hint="choose a decoder model (gpuplan models lists them); embedding serving is not modelled",
        )


def check_context_window(model: ModelSpec, context_tokens: int) -> None:
    """UserInputError when prompt + answer exceed the model's trained window (``max_position_embeddings``):
    vLLM refuses such a max_model_len unless told to (VLLM_ALLOW_LONG_MAX_MODEL_LEN). Planning front
    ends call it; an explicit ``max_model_len`` (and published benchmarks that ran beyond the window)
    skip it."""
    window = model.max_position_embeddings
    if window is not None and context_tokens > window:
        raise UserInputError(
            f"{context_tokens:,} tokens of prompt + answer exceed {model.id}'s context window of {window:,} "
            "(max_position_embeddings)",
            hint="shorten the prompt or the answer, choose a longer-context model, or set max_model_len "
            "explicitly to plan beyond the trained window",
        )


def _busy_replicas(w: Workload, replicas: int) -> float:
    """Replicas with work: one request at a time keeps one busy, C < replicas requests keep C busy."""
    if w.scenario == "single":
        return 1.0
    load = {"concurrency": w.concurrency, "static_batch": w.batch_size}.get(w.scenario)
    return float(replicas) if load is None else min(float(replicas), load)


def decode_bound(step: StepModel, running: float) -> Literal["memory", "compute"]:
    """Which roofline limits the decode step's GEMMs at this batch (for explanations)."""
    spec = step.layout.speculative  # a verify step runs k + 1 tokens per sequence
    flops = running * (1 if spec is None else spec.queries) * step.matmul_flops_per_token
    flops /= step.layout.gpus_per_replica
    t_compute = flops / step.gemm_flops_per_s
    t_memory = step.dense_weight_bytes / step.bytes_per_s
    return "compute" if t_compute > t_memory else "memory"

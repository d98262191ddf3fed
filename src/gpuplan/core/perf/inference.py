"""Steady-state serving predictions for the scenario kinds of the validation data.

* ``single``: one request at a time (batch 1). TTFT = prefill of the prompt; TPOT = decode step
  at batch 1 and the mean context; tokens/s = output / E2E (decode rate when no prompt is given).
* ``static_batch``: B identical requests prefilled together, then decoded together.
* ``concurrency``: a closed loop of C requests with continuous batching. N = min(C, KV capacity,
  max_num_seqs) run at once, spread over their cycle (the state real loops settle in: answer
  lengths and jitter pull clients that started together apart). A new prompt waits for the step the
  engine started as the last request ended (one TPOT), then runs its own chunks beside the N decodes
  (``O``), after half of another prompt's prefill when one is under way (probability β). Every other
  request's prompt interrupts a request's decoding, a share β = λ·p·(N − 1)/N of the GPU (``p`` = O
  − those steps' decode part), so TPOT = t_decode(N)/(1 − β), capped at a step carrying a full
  chunk; Little's law λ·E2E = N closes it (Newton). Past the engine's prefill budget (more prompts
  per second than full chunks in every step admit) prompts queue: every step carries a full chunk
  and only chunk·(output − 1)/input requests decode. One client is exactly ``single``; clients beyond N wait (C − N)/λ.
* ``offline``: all requests available at once, in waves of N at the engine's limit: one cycle
  prefills N prompts then decodes them together, lasting ``N · t_prefill(prompt) + output ·
  t_decode(N, mean context)``; throughput is N·output over it.
* ``rate``: open-loop arrivals at λ requests/s per replica. Prefills take a share f = λ·t_prefill
  of the GPU, so TPOT = t_decode(N)/(1 − f) and TTFT = t_prefill/(1 − f) + (1 − e^(−N))·TPOT/2 (an
  arrival waits for the step in progress to end when the engine is busy); the running count follows
  Little's law, N = λ·E2E, solved by fixed-point iteration. f ≥ 1 or N above capacity is overload.

Prefill runs in chunks of the engine's max batched tokens, so a prompt's prefill costs its share
of a full chunk (weights read once per chunk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

from pydantic import Field

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import InfeasibleError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import InferenceMemory, inference_memory
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.units import GIB
from gpuplan.data.calibration import default_calibration

Scenario = Literal["offline", "concurrency", "single", "static_batch", "rate"]
FIXED_POINT_ITERATIONS = 30
FIXED_POINT_TOLERANCE = 1e-3
"""N ↦ λ·E2E(N) is increasing, so plain iteration from N = 1 climbs monotonically to the fixed point
(or past the capacity, which is overload)."""
OVERLOADED = math.inf
SPREAD_NEWTON_STEPS = 50
SPREAD_TOLERANCE = 1e-12
"""Newton on the closed loop's request rate (``_SpreadLoop.solve_rate``): converges in a handful of
steps to float precision; the bound only guards against a non-terminating loop."""


class InferenceWorkload(FrozenModel):
    """What the replicas are asked to do."""

    scenario: Scenario = "concurrency"
    input_tokens: int = Field(default=0, ge=0, le=10_000_000)
    output_tokens: int = Field(ge=1, le=10_000_000)
    concurrency: float | None = Field(default=None, ge=1, le=1e7, description="requests in flight")
    batch_size: float | None = Field(default=None, ge=1, le=1e7, description="static batch size")
    rate_rps: float | None = Field(default=None, gt=0, le=1e7, description="open-loop arrival rate")


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
        cal: Calibration | None = None,
    ) -> ReplicaModel:
        """InfeasibleError (with the per-GPU need) when one ``context_tokens`` request cannot fit."""
        cal = cal or default_calibration()
        mem = inference_memory(model, gpu, layout, max_model_len=max(context_tokens, 1))
        if not mem.fits and mem.kv_pool_bytes > 0:
            raise InfeasibleError(
                f"one request of {mem.max_model_len:,} context tokens does not fit the KV cache of "
                f"{layout.tp * layout.pp}x{gpu.id} ({layout.weight_dtype}): only {mem.max_concurrency:.2f} of it "
                f"fits in {mem.kv_pool_bytes / GIB:.1f} GiB per GPU",
                hint="shorten the context, use fp8 KV cache, or add GPUs",
            )
        if not mem.fits:
            need = (mem.weights_bytes + mem.activation_bytes + mem.overhead_bytes) / GIB
            raise InfeasibleError(
                f"{model.id} does not fit on {layout.tp * layout.pp}x{gpu.id} ({layout.weight_dtype}): needs "
                f"{need:.1f} GiB per GPU before KV cache, budget {mem.budget_bytes / GIB:.1f} GiB",
                hint="raise tp/pp, use a smaller weight dtype or a larger GPU",
            )
        return cls(step=StepModel.build(model, gpu, layout, cal), memory=mem)

    def capacity(self, workload: InferenceWorkload) -> float:
        """Most requests one replica runs at once for this workload (KV and engine limits)."""
        return _capacity(self.step, self.memory, workload)

    def run(self, workload: InferenceWorkload) -> tuple[float, float, float, float]:
        """(TTFT s, TPOT s, output tokens/s of this replica, requests running) for a per-replica workload."""
        return _SCENARIOS[workload.scenario](self.step, self.memory, workload)


def predict_inference(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: InferenceWorkload,
    *,
    cal: Calibration | None = None,
    max_model_len: int | None = None,
) -> InferencePrediction:
    """Predict a scenario on ``layout.replicas`` replicas; InfeasibleError if one request cannot fit.

    ``concurrency`` and ``batch_size`` are system-wide and split evenly over the replicas.
    ``max_model_len`` (default: prompt + output) is the context the engine is configured for; it
    sets the activation profile and the per-request KV the engine plans for.
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


def _busy_replicas(w: InferenceWorkload, replicas: int) -> float:
    """Replicas with work: one request at a time keeps one busy, C < replicas requests keep C busy."""
    if w.scenario == "single":
        return 1.0
    load = {"concurrency": w.concurrency, "static_batch": w.batch_size}.get(w.scenario)
    return float(replicas) if load is None else min(float(replicas), load)


def _mean_context(w: InferenceWorkload) -> float:
    return w.input_tokens + w.output_tokens / 2.0


def _capacity(step: StepModel, mem: InferenceMemory, w: InferenceWorkload) -> float:
    """Sequences one replica can run at once: KV capacity and the engine's max_num_seqs."""
    full = step.engine.kv_reservation == "full"
    per_request = w.input_tokens + (w.output_tokens if full else w.output_tokens / 2)
    by_kv = mem.max_concurrency * mem.max_model_len / max(per_request, 1.0)
    return max(min(float(step.max_seqs), by_kv), 1.0)


def _prefill_share_s(step: StepModel, mem: InferenceMemory, w: InferenceWorkload, running: float) -> float:
    """Prefill time of one prompt when prompts are packed into chunks of max batched tokens."""
    if w.input_tokens == 0:
        return 0.0
    tokens = min(float(step.chunk_tokens), max(running * w.input_tokens, float(w.input_tokens)))
    return step.prefill_s(tokens=tokens, prompt_tokens=w.input_tokens) * w.input_tokens / tokens


def _single(step: StepModel, mem: InferenceMemory, w: InferenceWorkload) -> tuple[float, float, float, float]:
    ttft = step.lone_prefill_s(w.input_tokens)  # in chunks, as the engine (and the simulator) runs it
    tpot = step.decode_s(batch=1, context=_mean_context(w))
    e2e = ttft + max(w.output_tokens - 1, 0) * tpot
    rate = 1.0 / tpot if w.input_tokens == 0 else w.output_tokens / max(e2e, 1e-12)
    return ttft, tpot, rate, 1.0


def _static(step: StepModel, mem: InferenceMemory, w: InferenceWorkload) -> tuple[float, float, float, float]:
    """A static batch runs together or not at all, every request to its full context. More requests
    than even the whole memory left after the weights can hold (no activation, runtime or
    utilisation margin: those are estimates) is infeasible."""
    batch = float(w.batch_size or 1)
    if mem.kv_pool_bytes > 0:
        per_request = mem.kv_pool_bytes / mem.max_concurrency  # KV bytes of one full-context request
        fits = (mem.usable_bytes - mem.weights_bytes) / per_request
        if batch > fits:
            raise InfeasibleError(
                f"a static batch of {batch:,.0f} requests of {w.input_tokens + w.output_tokens:,} tokens "
                f"does not fit one replica: the memory left after the weights holds {math.floor(fits):,}",
                hint="lower batch_size, add replicas or GPUs (tp), or use an fp8 KV cache",
            )
    ttft = step.prefill_s(tokens=batch * max(w.input_tokens, 1), prompt_tokens=max(w.input_tokens, 1))
    tpot = step.decode_s(batch=batch, context=_mean_context(w))
    e2e = ttft + max(w.output_tokens - 1, 0) * tpot
    return ttft, tpot, batch * w.output_tokens / e2e, batch


def _cycle(
    step: StepModel, mem: InferenceMemory, w: InferenceWorkload, want: float
) -> tuple[float, float, float, float]:
    running = min(want, _capacity(step, mem, w))
    prefill = _prefill_share_s(step, mem, w, running)
    tpot = step.decode_s(batch=running, context=_mean_context(w))
    cycle = running * prefill + w.output_tokens * tpot
    queued_cycles = max(want - running, 0.0) / running
    ttft = (running + 1) / 2 * prefill + queued_cycles * cycle
    return ttft, tpot, running * w.output_tokens / cycle, running


def _rate(step: StepModel, mem: InferenceMemory, w: InferenceWorkload) -> tuple[float, float, float, float]:
    """Open-loop steady state (module docstring); returns inf latencies when the replica is overloaded."""
    rate = w.rate_rps or 0.0
    cap = _capacity(step, mem, w)
    alone = step.lone_prefill_s(w.input_tokens)
    running, busy, tpot = 1.0, 0.0, 0.0
    for _ in range(FIXED_POINT_ITERATIONS):  # TTFT is a small share of E2E: iterate on the lone prefill
        prefill = _prefill_share_s(step, mem, w, max(running, 1.0))
        busy = rate * prefill
        if busy >= 1.0:
            return OVERLOADED, OVERLOADED, 0.0, cap
        tpot = step.decode_s(batch=max(running, 1.0), context=_mean_context(w)) / (1.0 - busy)
        ttft = alone / (1.0 - busy) + _step_boundary_wait_s(running, tpot)
        new_running = rate * (ttft + max(w.output_tokens - 1, 0) * tpot)
        if new_running > cap:
            return OVERLOADED, OVERLOADED, 0.0, cap
        converged = abs(new_running - running) < FIXED_POINT_TOLERANCE * max(running, 1.0)
        running = new_running
        if converged:
            break
    ttft = _own_prefill_s(step, w, running, alone) / (1.0 - busy) + _step_boundary_wait_s(running, tpot)
    return ttft, tpot, rate * w.output_tokens, running


def _own_prefill_s(step: StepModel, w: InferenceWorkload, running: float, alone: float) -> float:
    """The steps that carry one prompt: its own chunks, each with the decodes of the requests running
    (a prompt's first token waits for its whole step, not for its share of a packed chunk). Alone it
    is exactly the single-request prefill (``alone``), and it never shrinks as the load grows."""
    if running <= 1.0 or w.input_tokens <= 0:
        return alone
    chunk = min(w.input_tokens, max(step.chunk_tokens, 1))
    mixed = _prompt_chunks(step, w) * step.step_s(
        batch=running, context=_mean_context(w), prefill_tokens=chunk, prompt_tokens=w.input_tokens
    )
    return max(alone, mixed)


def _prompt_chunks(step: StepModel, w: InferenceWorkload) -> int:
    """Steps one prompt's prefill spans: chunks of at most the engine's max batched tokens."""
    return math.ceil(w.input_tokens / max(step.chunk_tokens, 1))


def _step_boundary_wait_s(running: float, step_s: float) -> float:
    """Mean wait of an arrival for the step in progress to end: half a step when the engine is busy,
    which it is with probability 1 − e^(−N) for N requests in system (Poisson occupancy); 0 when idle."""
    return (1.0 - math.exp(-running)) * step_s / 2.0


def _concurrency(
    step: StepModel, mem: InferenceMemory, w: InferenceWorkload
) -> tuple[float, float, float, float]:
    """Closed loop spread over its cycle (module docstring); Little's law solved by Newton's method."""
    clients = float(w.concurrency or 1)
    running = min(clients, _capacity(step, mem, w))
    decode = step.decode_s(batch=running, context=_mean_context(w))
    if w.output_tokens == 1 and clients > 1:  # prefill-only requests: nothing decodes, prompts pack
        share_s = _prefill_share_s(step, mem, w, running)
        rate = 1.0 / (share_s if share_s > 0 else decode)
        ttft = max((running + 1.0) / 2.0 * share_s, step.lone_prefill_s(w.input_tokens))
        return ttft + (clients - running) / rate, decode, rate, running
    if w.input_tokens > 0:
        own = _own_prefill_s(step, w, running, step.lone_prefill_s(w.input_tokens))
        marginal = max(own - _prompt_chunks(step, w) * decode, 0.0) if running > 1.0 else own
    else:  # no prompt: the first token is a decode step (as ``single`` prices a decode-speed test)
        own, marginal = decode, 0.0
    loop = _SpreadLoop(running, own, marginal, decode, max(w.output_tokens - 1, 0))
    share = loop.share(loop.solve_rate())
    tpot = decode / (1.0 - share)
    budget = _prompt_budget(step, w, running)
    if budget is not None:
        tpot = min(tpot, budget.longest_step_s)  # no step lasts longer than one carrying a full chunk
    ttft = own * (1.0 + share / 2.0) + loop.wait_steps * tpot
    rate = running / (ttft + loop.tokens_after_first * tpot)  # Little's law
    if budget is not None and rate > budget.rate:
        rate, tpot = budget.rate, min(tpot, budget.tpot)  # prompts queue for the budget: full-chunk steps
        ttft = running / rate - loop.tokens_after_first * tpot
    ttft += max(clients - running, 0.0) / rate
    return (ttft if w.input_tokens > 0 else 0.0), tpot, rate * w.output_tokens, running


class _Budget(NamedTuple):
    rate: float
    tpot: float
    longest_step_s: float


def _prompt_budget(step: StepModel, w: InferenceWorkload, running: float) -> _Budget | None:
    """(request rate, TPOT, longest step) of a loop that starts prompts as fast as the
    engine's max batched tokens admit (the bound on the spread loop's rate): every step then carries a full
    chunk, ``chunk/input`` prompts start per step and each decodes for ``output − 1`` steps, so
    ``chunk·(output − 1)/input`` requests (at most ``running``) decode beside the chunk while the rest
    wait. The longest step is a full chunk beside all ``running`` decodes. None without a prompt."""
    if w.input_tokens <= 0:
        return None
    chunk = min(float(step.chunk_tokens), running * w.input_tokens)
    decoding = min(running, max(chunk * max(w.output_tokens - 1, 0) / w.input_tokens, 1.0))
    context = _mean_context(w)
    full_step_s = step.step_s(
        batch=decoding, context=context, prefill_tokens=chunk, prompt_tokens=w.input_tokens
    )
    longest_s = step.step_s(
        batch=running, context=context, prefill_tokens=chunk, prompt_tokens=w.input_tokens
    )
    return _Budget(chunk / w.input_tokens / full_step_s, full_step_s, longest_s)


@dataclass(frozen=True)
class _SpreadLoop:
    """E2E(λ) of a closed loop of ``running`` requests spread over their cycle. A client sends its next
    request as its last one ends, when the engine has already started the next step: the prompt waits
    for that step (one TPOT; none when it is the only request), then runs its own chunks (``own`` s),
    after half of another prompt's prefill when one is under way (probability β); the others' prompts
    take a share β = λ·marginal·(N − 1)/N of the GPU away from its decoding. Engines finish a started
    prompt before admitting the next, so later prompts never slow its own chunks."""

    running: float
    own: float
    marginal: float
    decode: float
    tokens_after_first: int

    @cached_property
    def interference(self) -> float:
        """k = marginal·(N − 1)/N: the share β = λ·k of the GPU the other clients' prompts take."""
        return self.marginal * (self.running - 1.0) / self.running

    def share(self, rate: float) -> float:
        return rate * self.interference

    @cached_property
    def wait_steps(self) -> float:
        """The step in progress a new request waits for: one, none for the only request."""
        return min(self.running - 1.0, 1.0)

    @cached_property
    def steps(self) -> float:
        """Decode steps of one request after its first token, plus the step it waits for on arrival."""
        return self.tokens_after_first + self.wait_steps

    def e2e(self, rate: float) -> float:
        share = self.share(rate)
        return self.own * (1.0 + share / 2.0) + self.steps * self.decode / (1.0 - share)

    def solve_rate(self) -> float:
        """λ with λ·E2E(λ) = N: Newton's method kept inside a shrinking bracket [0, min(N/E2E(0), 1/k))
        (k = marginal·(N − 1)/N; λ·E2E rises with λ), bisecting when a step would leave it. A handful of
        steps reach float precision; one client (k = 0) is exact at once."""
        base = self.own + self.steps * self.decode
        high = self.running / max(base, 1e-12)
        k = self.interference
        if k <= 0.0:
            return high
        low, high = 0.0, min(high, 1.0 / k)
        rate = high / 2.0
        for _ in range(SPREAD_NEWTON_STEPS):
            e2e = self.e2e(rate)
            value = rate * e2e - self.running
            if value > 0:
                high = rate
            else:
                low = rate
            slope = e2e + rate * k * (self.own / 2.0 + self.steps * self.decode / (1.0 - k * rate) ** 2)
            guess = rate - value / slope
            guess = guess if low < guess < high else (low + high) / 2.0
            if abs(guess - rate) <= SPREAD_TOLERANCE * rate:
                return guess
            rate = guess
        return rate


def _offline(
    step: StepModel, mem: InferenceMemory, w: InferenceWorkload
) -> tuple[float, float, float, float]:
    return _cycle(step, mem, w, math.inf)


_SCENARIOS = {
    "single": _single,
    "static_batch": _static,
    "concurrency": _concurrency,
    "offline": _offline,
    "rate": _rate,
}


def decode_bound(step: StepModel, running: float) -> Literal["memory", "compute"]:
    """Which roofline limits the decode step's GEMMs at this batch (for explanations)."""
    flops = running * step.matmul_flops_per_token / (step.layout.tp * step.layout.pp)
    t_compute = flops / step.gemm_flops_per_s
    t_memory = step.dense_weight_bytes / step.bytes_per_s
    return "compute" if t_compute > t_memory else "memory"

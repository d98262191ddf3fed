"""One replica's steady state in the open scenario kinds of the validation data, and the step terms
every kind shares (the closed loop, ``concurrency``, is in ``perf/closed_loop.py``).

* ``single``: one request at a time (batch 1). TTFT = prefill of the prompt; TPOT = decode step
  at batch 1 and the mean context; tokens/s = output / E2E (decode rate when no prompt is given).
* ``static_batch``: B identical requests prefilled together, then decoded together.
* ``offline``: all requests available at once, in waves of N at the engine's limit: one cycle
  prefills N prompts then decodes them together, lasting ``N · t_prefill(prompt) + output ·
  t_decode(N, mean context)``; throughput is N·output over it.
* ``rate``: open-loop arrivals at λ requests/s per replica. Prefills take a share f = λ·t_prefill
  of the GPU, so TPOT = t_decode(N)/(1 − f) and TTFT = t_prefill/(1 − f) + (1 − e^(−N))·TPOT/2 (an
  arrival waits for the step in progress to end when the engine is busy); the running count follows
  Little's law, N = λ·E2E, solved by fixed-point iteration. f ≥ 1 or N above capacity is overload.

Prefill runs in chunks of the engine's max batched tokens, so a prompt's prefill costs its share
of a full chunk (weights read once per chunk). Each kind returns (TTFT s, TPOT s, output tokens/s
of the replica, requests running).
"""

from __future__ import annotations

import math
from typing import TypedDict

from gpuplan.core.errors import InfeasibleError
from gpuplan.core.perf.memory import InferenceMemory
from gpuplan.core.perf.prefix_cache import cached_prompt_tokens, computed_prompt_tokens
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.workload import Workload

FIXED_POINT_ITERATIONS = 30
FIXED_POINT_TOLERANCE = 1e-3
"""N ↦ λ·E2E(N) is increasing, so plain iteration from N = 1 climbs monotonically to the fixed point
(or past the capacity, which is overload)."""
OVERLOADED = math.inf


def mean_context(w: Workload) -> float:
    """A request's life-mean context: the prompt and half the answer."""
    return w.input_tokens + w.output_tokens / 2.0


def replica_capacity(step: StepModel, mem: InferenceMemory, w: Workload) -> float:
    """Sequences one replica can run at once: KV capacity and the engine's max_num_seqs."""
    full = step.engine.kv_reservation == "full"
    per_request = w.input_tokens + (w.output_tokens if full else w.output_tokens / 2)
    by_kv = mem.max_concurrency * mem.max_model_len / max(per_request, 1.0)
    return max(min(float(step.max_seqs), by_kv), 1.0)


def prefill_share_s(step: StepModel, mem: InferenceMemory, w: Workload, running: float) -> float:
    """Prefill time of one prompt when prompts are packed into chunks of max batched tokens (only its
    uncached tokens are computed, ``perf/prefix_cache.py``)."""
    if w.input_tokens == 0:
        return 0.0
    own = computed_prompt_tokens(w)
    tokens = min(float(step.prefill_step_tokens), max(running * own, float(own)))
    shape = prompt_shape(w)
    return step.prefill_s(tokens=tokens, **shape) * own / tokens


class PromptShape(TypedDict):
    """The prompt arguments of the step model's prefill terms."""

    prompt_tokens: float
    cached_tokens: float


def prompt_shape(w: Workload) -> PromptShape:
    """The prompt arguments of the step model's prefill terms: the whole prompt and its cached share."""
    return {"prompt_tokens": float(w.input_tokens), "cached_tokens": float(cached_prompt_tokens(w))}


def lone_prefill_s(step: StepModel, w: Workload) -> float:
    """One request's prompt alone, in chunks, its cached prefix skipped."""
    return step.lone_prefill_s(w.input_tokens, cached_prompt_tokens(w))


def own_prefill_s(step: StepModel, w: Workload, running: float, alone: float) -> float:
    """The steps that carry one prompt: its own chunks, each with the decodes of the requests running
    (a prompt's first token waits for its whole step, not for its share of a packed chunk). Alone it
    is exactly the single-request prefill (``alone``), and it never shrinks as the load grows."""
    if running <= 1.0 or w.input_tokens <= 0:
        return alone
    chunk = min(computed_prompt_tokens(w), max(step.prefill_step_tokens, 1))
    mixed = prompt_chunks(step, w) * step.step_s(
        batch=running, context=mean_context(w), prefill_tokens=chunk, **prompt_shape(w)
    )
    return max(alone, mixed)


def prompt_chunks(step: StepModel, w: Workload) -> int:
    """Steps one prompt's prefill spans: chunks of at most the engine's max batched tokens."""
    return math.ceil(computed_prompt_tokens(w) / max(step.prefill_step_tokens, 1))


def step_boundary_wait_s(running: float, step_s: float) -> float:
    """Mean wait of an arrival for the step in progress to end: half a step when the engine is busy,
    which it is with probability 1 − e^(−N) for N requests in system (Poisson occupancy); 0 when idle."""
    return (1.0 - math.exp(-running)) * step_s / 2.0


def run_single(step: StepModel, mem: InferenceMemory, w: Workload) -> tuple[float, float, float, float]:
    ttft = lone_prefill_s(step, w)  # in chunks, as the engine (and the simulator) runs it
    tpot = step.decode_s(batch=1, context=mean_context(w))
    e2e = ttft + max(w.output_tokens - 1, 0) * tpot
    rate = 1.0 / tpot if w.input_tokens == 0 else w.output_tokens / max(e2e, 1e-12)
    return ttft, tpot, rate, 1.0


def run_static_batch(step: StepModel, mem: InferenceMemory, w: Workload) -> tuple[float, float, float, float]:
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
    shape = prompt_shape(w)
    shape["prompt_tokens"] = float(max(w.input_tokens, 1))
    ttft = step.prefill_s(tokens=batch * max(computed_prompt_tokens(w), 1), **shape)
    tpot = step.decode_s(batch=batch, context=mean_context(w))
    e2e = ttft + max(w.output_tokens - 1, 0) * tpot
    return ttft, tpot, batch * w.output_tokens / e2e, batch


def _cycle(
    step: StepModel, mem: InferenceMemory, w: Workload, want: float
) -> tuple[float, float, float, float]:
    running = min(want, replica_capacity(step, mem, w))
    prefill = prefill_share_s(step, mem, w, running)
    tpot = step.decode_s(batch=running, context=mean_context(w))
    cycle = running * prefill + w.output_tokens * tpot
    queued_cycles = max(want - running, 0.0) / running
    ttft = (running + 1) / 2 * prefill + queued_cycles * cycle
    return ttft, tpot, running * w.output_tokens / cycle, running


def run_offline(step: StepModel, mem: InferenceMemory, w: Workload) -> tuple[float, float, float, float]:
    return _cycle(step, mem, w, math.inf)


def run_rate(step: StepModel, mem: InferenceMemory, w: Workload) -> tuple[float, float, float, float]:
    """Open-loop steady state (module docstring); returns inf latencies when the replica is overloaded."""
    rate = w.rate_rps or 0.0
    cap = replica_capacity(step, mem, w)
    alone = lone_prefill_s(step, w)
    running, busy, tpot = 1.0, 0.0, 0.0
    for _ in range(FIXED_POINT_ITERATIONS):  # TTFT is a small share of E2E: iterate on the lone prefill
        prefill = prefill_share_s(step, mem, w, max(running, 1.0))
        busy = rate * prefill
        if busy >= 1.0:
            return OVERLOADED, OVERLOADED, 0.0, cap
        tpot = step.decode_s(batch=max(running, 1.0), context=mean_context(w)) / (1.0 - busy)
        ttft = alone / (1.0 - busy) + step_boundary_wait_s(running, step.step_of_tpot_s(tpot))
        new_running = rate * (ttft + max(w.output_tokens - 1, 0) * tpot)
        if new_running > cap:
            return OVERLOADED, OVERLOADED, 0.0, cap
        converged = abs(new_running - running) < FIXED_POINT_TOLERANCE * max(running, 1.0)
        running = new_running
        if converged:
            break
    ttft = own_prefill_s(step, w, running, alone) / (1.0 - busy) + step_boundary_wait_s(
        running, step.step_of_tpot_s(tpot)
    )
    return ttft, tpot, rate * w.output_tokens, running

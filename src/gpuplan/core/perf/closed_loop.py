"""The ``concurrency`` scenario: one replica's steady state under a closed loop of C clients.

A closed loop of C requests with continuous batching. N = min(C, KV capacity, max_num_seqs) run at
once, spread over their cycle (the state real loops settle in: answer lengths and jitter pull clients
that started together apart). A new prompt waits for the step the engine started as the last request
ended (one TPOT), then runs its own chunks beside the N decodes (``O``), after half of another
prompt's prefill when one is under way (probability β). Every other request's prompt interrupts a
request's decoding, a share β = λ·p·(N − 1)/N of the GPU (``p`` = O − those steps' decode part), so
TPOT = t_decode(N)/(1 − β), capped at a step carrying a full chunk; Little's law λ·E2E = N closes it
(Newton). Past the engine's prefill budget (more prompts per second than full chunks in every step
admit) prompts queue: every step carries a full chunk and only chunk·(output − 1)/input requests
decode. One client is exactly ``single``; clients beyond N wait (C − N)/λ.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from gpuplan.core.perf.memory import InferenceMemory
from gpuplan.core.perf.prefix_cache import computed_prompt_tokens
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.perf.scenarios import (
    lone_prefill_s,
    mean_context,
    own_prefill_s,
    prefill_share_s,
    prompt_chunks,
    prompt_shape,
    replica_capacity,
)
from gpuplan.core.workload import Workload

SPREAD_NEWTON_STEPS = 50
SPREAD_TOLERANCE = 1e-12
"""Newton on the closed loop's request rate (``_SpreadLoop.solve_rate``): converges in a handful of
steps to float precision; the bound only guards against a non-terminating loop."""


def run_concurrency(step: StepModel, mem: InferenceMemory, w: Workload) -> tuple[float, float, float, float]:
    """Closed loop spread over its cycle (module docstring); Little's law solved by Newton's method.
    Returns (TTFT s, TPOT s, output tokens/s of the replica, requests running)."""
    clients = float(w.concurrency or 1)
    running = min(clients, replica_capacity(step, mem, w))
    decode = step.decode_s(batch=running, context=mean_context(w))
    if w.output_tokens == 1 and clients > 1:  # prefill-only requests: nothing decodes, prompts pack
        share_s = prefill_share_s(step, mem, w, running)
        rate = 1.0 / (share_s if share_s > 0 else decode)
        ttft = max((running + 1.0) / 2.0 * share_s, lone_prefill_s(step, w))
        return ttft + (clients - running) / rate, decode, rate, running
    if w.input_tokens > 0:
        own = own_prefill_s(step, w, running, lone_prefill_s(step, w))
        marginal = max(own - prompt_chunks(step, w) * decode, 0.0) if running > 1.0 else own
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


def _prompt_budget(step: StepModel, w: Workload, running: float) -> _Budget | None:
    """(request rate, TPOT, longest step) of a loop that starts prompts as fast as the
    engine's max batched tokens admit (the bound on the spread loop's rate): every step then carries a full
    chunk, ``chunk/input`` prompts start per step and each decodes for ``output − 1`` steps, so
    ``chunk·(output − 1)/input`` requests (at most ``running``) decode beside the chunk while the rest
    wait. The longest step is a full chunk beside all ``running`` decodes. None without a prompt."""
    if w.input_tokens <= 0:
        return None
    own = computed_prompt_tokens(w)  # the prompt tokens the budget admits: the uncached ones
    chunk = min(float(step.prefill_step_tokens), running * own)
    decoding = min(running, max(chunk * max(w.output_tokens - 1, 0) / own, 1.0))
    context, shape = mean_context(w), prompt_shape(w)
    full_step_s = step.step_s(batch=decoding, context=context, prefill_tokens=chunk, **shape)
    longest_s = step.step_s(batch=running, context=context, prefill_tokens=chunk, **shape)
    return _Budget(chunk / own / full_step_s, full_step_s, longest_s)


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

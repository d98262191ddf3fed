"""The prefill side of the tail model (``tail_model.py``): prompts queue for the step's token budget.

The simulator's scheduler (``replica.py``) gives each step the budget C of prompt tokens left beside
the decodes, first to the prompts already being prefilled, then to the waiting ones in arrival order.
Seen from the queue, the budget is a server of per-prompt service S = I·s/B (s: a full step of B
prompt tokens beside the decodes; I: the prompt's tokens) in a busy period, and an M/D/1 queue gives
the work V ahead of an arriving prompt. But the prompt's first token comes at the end of the step that
carries its last token, and that step is filled with the prompts that came *after* it (those waiting
when the step begins): with room for r more prompts in that step, its first token waits V + S·min(K, r)
past its own service, K the Poisson arrivals while it waited (λ(V + ℓ), ℓ: its own earlier steps).
Measured on the simulator (Llama-3.1-8B H100 fp8, 2,048-token prompts in 8,192-token steps, half load):
prompts once scheduled took 49 ms on average but 116 ms at the 99th percentile, two or three prompts to
a step, where one prompt alone takes 43 ms.

The P99 of V + S·min(K, r), with the Cramér–Lundberg tail P(V > v) ≈ c·e^(−γv) (γ = x/S,
ρ(eˣ − 1) = x, c = (1 − ρ)/(x + ρ − 1)):

* room for ``ONE_FILL_ROOM`` prompts or more: uncapped, V + S·K decays at θ with
  θ + λ(e^(θS) − 1) = γ (the pole of its Laplace transform W*(s + λ(1 − e^(−sS)))), prefactor
  c·γ / (θ(1 + λS·e^(θS))) · e^(λℓ(e^(θS) − 1)), never above V's P99 plus the whole room;
* less room (prompts as long as the budget or longer): one later prompt fills it, J = room·1{K ≥ 1},
  whose tail is closed-form in the exponential V; its 1 % point by bisection.

A request's decode life starts at a prompt's completion, which leaves behind what an arrival finds,
λ·E[TTFT] prompts (Little's law), and tends to end where no prompt is being prefilled (decode steps
are fastest there): ``backlog`` gives the mean and variance of those extra prompts, which the tagged
request's decode steps wait for (``tail_model._decode_at``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TAIL_PROBABILITY = 0.01
"""P99: one request in a hundred above."""
CRAMER_NEWTON_STEPS = 40
"""Newton steps for the M/D/1 decay root; convex f, started right of the root, converges monotonically."""
ONE_FILL_ROOM = 1.5
"""Prompts of room in the last step below which one later prompt is taken to fill it (a budget of one
prompt or less: Llama-3.1-8B on A100/L4, 2,048-token prompts in 2,048-token steps); at or above it the
later arrivals fill it one prompt each (``packed_wait_p99_s``)."""
DECAY_NEWTON_STEPS = 60
"""Newton steps for θ (``_packed_decay``): convex in θ, safeguarded by bisection."""
BISECTION_STEPS = 30
"""Halvings of [V99, V99 + room] for the one-fill P99, stopped at 1e-4 of the answer (0.1 ms in 1 s)."""


@dataclass(frozen=True)
class PrefillQueue:
    """The prompt queue of one replica at one rate: per-prompt service in a busy period, the room a
    prompt's last step leaves for later ones, and its own earlier steps (all seconds)."""

    rate_rps: float
    service_s: float
    room_s: float
    lead_s: float

    @property
    def load(self) -> float:
        return self.rate_rps * self.service_s


def cramer_root(rho: float) -> float:
    """x > 0 with ρ(eˣ − 1) = x (M/D/1 decay, in units of the service time)."""
    x = 2.0 * math.log(1.0 / rho) + 2.0
    for _ in range(CRAMER_NEWTON_STEPS):
        ex = math.exp(x)
        step = (rho * (ex - 1.0) - x) / (rho * ex - 1.0)
        x -= step
        if abs(step) < 1e-9 * x:
            break
    return x


def md1_wait_p99_s(*, rate_rps: float, service_s: float) -> float:
    """P99 wait in an M/D/1 queue (Cramér–Lundberg asymptote; 0 when fewer than 1 % wait at all)."""
    rho = rate_rps * service_s
    if rho <= 0.0:
        return 0.0
    if rho >= 1.0:
        return math.inf
    first = math.log((1.0 - TAIL_PROBABILITY) / (1.0 - rho)) / rate_rps
    if first < service_s:  # exact below one service time: P(W <= t) = (1 - rho)·e^(λt), t < S
        return max(first, 0.0)
    x = cramer_root(rho)
    scale = (1.0 - rho) / (x + rho - 1.0)
    return max(math.log(scale / TAIL_PROBABILITY), 0.0) * service_s / x


def md1_wait_moments(*, rate_rps: float, service_s: float) -> tuple[float, float]:
    """Mean and variance of the M/D/1 wait (Pollaczek–Khinchine; Takács: E[W²] = 2E[W]² + λS³/(3(1 − ρ)));
    inf past ρ = 1."""
    rho = rate_rps * service_s
    if rho >= 1.0:
        return math.inf, math.inf
    mean = rho * service_s / (2.0 * (1.0 - rho))
    second = 2.0 * mean * mean + rate_rps * service_s**3 / (3.0 * (1.0 - rho))
    return mean, second - mean * mean


def packed_wait_p99_s(queue: PrefillQueue) -> float:
    """P99 of V + S·min(K, room): the wait past a prompt's own service, later prompts packed into its
    last step included (module docstring); inf at ρ ≥ 1."""
    lam, service = queue.rate_rps, queue.service_s
    rho = queue.load
    if rho >= 1.0:
        return math.inf
    v99 = md1_wait_p99_s(rate_rps=lam, service_s=service)
    if queue.room_s <= 0.0 or rho <= 0.0:
        return v99
    x = cramer_root(rho)
    gamma, scale = x / service, (1.0 - rho) / (x + rho - 1.0)
    if queue.room_s < ONE_FILL_ROOM * service:
        return _one_fill_p99_s(queue, v99, gamma, scale)
    theta = _packed_decay(lam, service, gamma)
    grown = math.exp(theta * service)
    prefactor = scale * gamma / (theta * (1.0 + lam * service * grown))
    prefactor *= math.exp(lam * queue.lead_s * (grown - 1.0))
    packed = max(math.log(prefactor / TAIL_PROBABILITY), 0.0) / theta
    return min(max(packed, v99), v99 + queue.room_s)


def _packed_decay(lam: float, service: float, gamma: float) -> float:
    """θ in (0, γ) with θ + λ(e^(θS) − 1) = γ (increasing and convex in θ): Newton, kept in its bracket."""
    lo, hi = 0.0, gamma
    theta = gamma / (1.0 + lam * service)
    for _ in range(DECAY_NEWTON_STEPS):
        grown = math.exp(theta * service)
        excess = theta + lam * (grown - 1.0) - gamma
        lo, hi = (lo, theta) if excess > 0.0 else (theta, hi)
        step = excess / (1.0 + lam * service * grown)
        nxt = theta - step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - theta) <= 1e-12 * gamma:
            return nxt
        theta = nxt
    return theta


def _one_fill_p99_s(queue: PrefillQueue, v99: float, gamma: float, scale: float) -> float:
    """The 1 % point of V + room·1{K ≥ 1} with P(V > v) = c·e^(−γv) for v > 0 and the atom 1 − ρ at 0."""
    lam, room, lead = queue.rate_rps, queue.room_s, queue.lead_s
    both = gamma + lam
    joint = scale * gamma * math.exp(-lam * lead) / both  # ∫ cγe^(−γv)·e^(−λ(v + ℓ)) dv, per e^(−(γ+λ)v)
    idle_fills = (1.0 - queue.load) * (1.0 - math.exp(-lam * lead))

    def above(t: float) -> float:
        start = max(t - room, 0.0)
        tail = scale * math.exp(-gamma * start) - joint * (math.exp(-both * start) - math.exp(-both * t))
        return tail + (idle_fills if t < room else 0.0)

    lo, hi = v99, v99 + room
    if above(lo) <= TAIL_PROBABILITY:
        return lo
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if above(mid) > TAIL_PROBABILITY else (lo, mid)
        if hi - lo <= 1e-4 * hi:
            break
    return hi


def backlog(queue: PrefillQueue, own_s: float) -> tuple[float, float]:
    """Mean and variance of the prompts a request's decode life starts behind: the arrivals during its
    TTFT (own service ``own_s`` + the M/D/1 wait), Poisson given the TTFT; inf past ρ = 1."""
    wait, spread = md1_wait_moments(rate_rps=queue.rate_rps, service_s=queue.service_s)
    lam = queue.rate_rps
    mean = lam * (own_s + wait)
    return mean, mean + lam * lam * spread

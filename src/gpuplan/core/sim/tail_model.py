"""An analytic stand-in for the serving simulator's P99s: one replica, Poisson arrivals, fixed lengths.

The simulator (``core/sim/simulator.py``) costs ~50 ms per 800-request run; sizing every GPU type ×
layout on P99 by bisection over it takes seconds. This model answers the same question in about a
millisecond from the same step model (``perf/roofline.py``) and the same batching limits
(``replica_limits``), so a search can size every candidate and leave the simulator to confirm the few
finalists (``core/recommend/confirm.py``).

At a per-replica rate λ, for prompts of I tokens and answers of O tokens:

* **Decode batch** (Little's law): n = λ·(O − 1)·TPOT, the root that iteration from 0 climbs to
  (``tail_solve``); a tagged request decodes among n others (PASTA: arrivals see the time average), so
  its steps run at 1 + n.
* **Mean TPOT**: decode steps d(1 + n) stretched by the prefill-interference share
  φ = λ·k·(s − d): each prompt adds k = ⌈I / (C − n)⌉ steps carrying a chunk of it (C: max batched
  tokens), each s − d longer than a decode-only step; and a request's life starts behind the β prompts
  that came during its own TTFT (``tail_prefill.backlog``). TPOT = (d + β·k(s − d)/(O − 1)) / (1 − φ).
* **P99 TPOT**: a request's TPOT is the mean of its own O − 1 steps. Its batch and the prompts that
  interfere both come from the Poisson arrivals in a window of its decode life T: a request arriving
  a seconds from the start of the window overlaps (T − |a|)/T of it (variance of the time-average
  batch λ·T·2/3, M/D/∞), and each arrival during the life adds δ = k·(s − d)/(O − 1) to the mean step;
  so does each prompt of the backlog. The prompts are a branching process (each one's steps let
  Poisson(φ) more arrive inside the life): their count is generalised-Poisson, third cumulant
  (1 + 2φ)/(1 − φ) times a Poisson's of the same variance. Normal quantile of the sum, with the
  Cornish–Fisher skew term.
* **P99 TTFT** = the step in progress (half a step, mean residual) + the prompt's own k chunks + the
  P99 wait behind earlier prompts and of the later ones packed into its last step
  (``tail_prefill.packed_wait_p99_s``: an M/D/1 queue whose server is the prefill token budget,
  service S = I·s(n, C − n)/(C − n), ρ = λ·S) + the P99 wait for a seat when requests in system
  approach the batch limit (max_num_seqs or the KV pool; Halfin–Whitt for the chance of waiting,
  an exponential tail of rate 2(c − a)/E2E for deterministic holding times, Kingman).
* **P99 E2E** = its mean plus the root-sum-square of the TTFT and decode excesses.

Light load reduces it exactly to the simulator's lone request: TTFT = the chunked prefill alone
(``lone_prefill_s``), TPOT = d(1). No rate above the stability limits (prefill ρ < 1, seats
a < c, φ < 1) is ever returned. Agreement with the simulator over a grid of GPUs, models and loads:
tests/unit/core/sim/test_tail_model.py (docs/simulator.md "Capacity search" has the table).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuplan.core.perf.inference import ReplicaModel, first_token_delay_s
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.simulator import replica_limits
from gpuplan.core.sim.tail_prefill import (
    TAIL_PROBABILITY,
    PrefillQueue,
    backlog,
    packed_wait_p99_s,
)
from gpuplan.core.sim.tail_solve import highest_passing, smallest_fixed_point
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S

Z99 = 2.3263478740408408
"""Standard normal 0.99 quantile."""
Z999 = 3.090232306167813
"""Standard normal 0.999 quantile: the KV-pool onset of preemption (below)."""
FIXED_POINT_ITERATIONS = 40
"""Evaluation budget of the decode fixed point (``tail_solve.smallest_fixed_point``): it takes ~5."""
FIXED_POINT_TOLERANCE = 1e-9
"""n ↦ λ·(O − 1)·TPOT(n) is increasing; iteration from n = 0 climbs to the fixed point or past a
stability limit (overload). Solved to this relative width: what plain iteration reaches only after
hundreds of steps when the loop gain nears 1 (it used to stop at 1e-3 a step or 40 steps: up to ~3 % short)."""
RATE_BISECTION_STEPS = 12
"""2^-12 of the bracket (0.025 %): far below the simulator's own P99 noise at 800 requests (~5 %)."""
RATE_GRID = 1 << RATE_BISECTION_STEPS
"""Rates the search resolves: ``RATE_GRID`` equal steps of the bracket, the points that bisection reaches."""
HALFIN_WHITT_NEVER_WAITS = 6.0
"""β = (c − a)/√a above which the chance of waiting is < 1e-8 (and φ(β) underflows soon after)."""
SLOPE_STEP = 1.0
"""Batch step of the finite-difference slope of the decode step time (seconds per sequence)."""
MIN_FEEDBACK_MARGIN = 0.05
"""Floor of 1 − ∂n/∂n: a burst that raises the batch slows every step, which keeps requests longer and
raises the batch again; the loop gain λ·(O − 1)·∂TPOT/∂n amplifies the batch excess by 1/(1 − gain)
(the derivative of the fixed point). Past a gain of 0.95 the estimate is left at 20× (near overload)."""


@dataclass(frozen=True)
class TailEstimate:
    """Predicted P99s (ms) of one replica at ``rate_rps``; ``stable`` False (and inf latencies) past
    a stability limit, whose name ``limit`` gives."""

    rate_rps: float
    ttft_p99_ms: float
    tpot_p99_ms: float
    e2e_p99_ms: float
    decode_batch: float
    stable: bool
    limit: str | None = None


@dataclass(frozen=True)
class _Lane:
    """What the model needs of one replica and one request shape, looked up once."""

    replica: ReplicaModel
    input_tokens: int
    output_tokens: int
    context: float
    budget_tokens: int
    seats: float
    kv_seats: float
    """Whole-context requests the KV pool holds. Requests in system are Poisson (M/G/∞); once the pool
    overflows at their 99.9th percentile, preemptions (recompute, LIFO) stall admissions for seconds and the
    P99 TTFT runs away (simulated: L4 Llama-3.1-8B bf16 2048/300, onset between 0.18 and 0.22 req/s;
    the 99th percentile would put it at 0.24)."""
    lone_prefill_s: float
    full_steps: dict[int, float] = field(default_factory=dict, compare=False)
    """Seconds of a step full of prompt tokens beside a whole number of decodes, by that number (``queue``)."""

    def decode_s(self, batch: float) -> float:
        return self.replica.step.decode_s(batch=max(min(batch, self.seats), 1.0), context=self.context)

    def chunk(self, batch: float) -> int:
        """Prefill tokens a step carries beside ``batch`` decodes (the rest of the token budget)."""
        return max(self.budget_tokens - math.ceil(min(batch, self.seats)), 1)

    def mixed_s(self, batch: float, tokens: float) -> float:
        """A step of ``batch`` decodes and ``tokens`` prompt tokens (a prefill step when no decodes)."""
        return self.replica.step.step_s(
            batch=min(batch, self.seats),
            context=self.context,
            prefill_tokens=tokens,
            prompt_tokens=self.input_tokens,
        )

    def prompt_steps_s(self, batch: float) -> tuple[float, int]:
        """Seconds and count of the steps that carry one prompt's chunks beside ``batch`` decodes."""
        if not self.input_tokens:
            return 0.0, 0
        if batch <= 0.0:
            return self.lone_prefill_s, math.ceil(self.input_tokens / max(self.budget_tokens, 1))
        chunk = min(self.chunk(batch), self.input_tokens)
        full, rest = divmod(self.input_tokens, chunk)
        total = full * self.mixed_s(batch, chunk) + (self.mixed_s(batch, rest) if rest else 0.0)
        return total, full + (1 if rest else 0)

    def queue(self, rate_rps: float, batch: float, steps_s: float, chunks: int) -> tuple[PrefillQueue, float]:
        """The prompt queue beside ``batch`` decodes (``tail_prefill``) given one prompt's steps there
        (``prompt_steps_s``), and that prompt's own seconds (never below the lone prefill)."""
        own_s = max(steps_s, self.lone_prefill_s)
        step_tokens = self.chunk(batch)
        whole = math.ceil(min(batch, self.seats))  # what the budget left depends on: memoised by it
        full_s = self.full_steps.get(whole)
        if full_s is None:
            full_s = self.full_steps[whole] = self.mixed_s(whole, step_tokens)
        per_token_s = full_s / step_tokens
        spare = (step_tokens - self.input_tokens % step_tokens) % step_tokens
        queue = PrefillQueue(
            rate_rps=rate_rps,
            service_s=min(self.input_tokens * per_token_s, own_s),
            room_s=spare * per_token_s,
            lead_s=max(chunks - 1, 0) * full_s,
        )
        return queue, own_s


def _lane(replica: ReplicaModel, input_tokens: int, output_tokens: int) -> _Lane:
    limits = replica_limits(replica, SimConfig(record_timeline=False))
    held = input_tokens + output_tokens / 2.0  # life-mean KV of a request (pages grow as it decodes)
    seats = min(float(limits.max_seqs), limits.kv_tokens / max(held + limits.state_tokens, 1.0))
    return _Lane(
        replica=replica,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        context=input_tokens + output_tokens / 2.0,
        budget_tokens=limits.max_tokens,
        seats=max(seats, 1.0),
        kv_seats=max(limits.kv_tokens / max(input_tokens + output_tokens + limits.state_tokens, 1.0), 1.0),
        lone_prefill_s=replica.step.lone_prefill_s(input_tokens),
    )


def _unstable(rate_rps: float, limit: str) -> TailEstimate:
    inf = math.inf
    return TailEstimate(rate_rps, inf, inf, inf, inf, stable=False, limit=limit)


@dataclass(frozen=True)
class _Decode:
    """The decode side at the fixed point: batch of others, mean step, interference and TPOT."""

    others: float
    step_s: float
    extra_s: float
    """Seconds one prompt's chunks add to the decode timeline (all its chunks together)."""
    chunks: int
    share: float
    tpot_s: float
    behind: float = 0.0
    """Prompts its decode life starts behind (mean; ``tail_prefill.backlog``)."""
    behind_var: float = 0.0


def _decode_at(lane: _Lane, rate_rps: float, others: float) -> _Decode:
    """A tagged request decodes among ``others``: its step, the extra seconds one prompt's chunks add,
    and the prompts it starts behind."""
    step_s = lane.decode_s(1.0 + others)
    prompt_s, chunks = lane.prompt_steps_s(1.0 + others)
    extra_s = max(prompt_s - chunks * step_s, 0.0)
    share = rate_rps * extra_s
    behind, behind_var = 0.0, 0.0
    if rate_rps > 0.0 and extra_s > 0.0:
        behind, behind_var = backlog(*lane.queue(rate_rps, 1.0 + others, prompt_s, chunks))
    gaps = max(lane.output_tokens - 1, 1)
    stable = share < 1.0 and math.isfinite(behind)
    tpot = (step_s + extra_s * behind / gaps) / (1.0 - share) if stable else math.inf
    return _Decode(others, step_s, extra_s, chunks, share, tpot, behind, behind_var)


def _decode_fixed_point(
    lane: _Lane, rate_rps: float, start: float = 0.0, above: float | None = None
) -> _Decode | str:
    """The decode state at ``rate_rps``, or the name of the limit it runs past: the smallest batch n
    with n = λ·(O − 1)·TPOT(n), the one that iteration from ``start`` climbs to (``start`` at or below
    it, ``above`` at or above it, e.g. the batches of a lower and a higher rate: n* rises with the
    rate), solved by ``tail_solve.smallest_fixed_point``."""
    gaps = max(lane.output_tokens - 1, 0)
    states: dict[float, _Decode] = {}

    def batch_after(others: float) -> float:
        state = states[others] = _decode_at(lane, rate_rps, others)
        return rate_rps * gaps * state.tpot_s if state.share < 1.0 else math.inf

    status, others = smallest_fixed_point(
        batch_after,
        start=start,
        ceiling=lane.seats,
        tolerance=FIXED_POINT_TOLERANCE,
        max_evals=FIXED_POINT_ITERATIONS,
        above=above,
    )
    if status == "infinite":
        return "prefill interference"
    if status == "ceiling":
        return "batch limit"
    return states.get(others) or _decode_at(lane, rate_rps, others)


def seat_wait_p99_s(*, offered: float, seats: float, hold_s: float) -> float:
    """P99 wait for one of ``seats`` batch slots at ``offered`` = λ·hold requests in system
    (Halfin–Whitt chance of waiting; exponential tail of rate 2(c − a)/hold, deterministic holds)."""
    if offered <= 0.0:
        return 0.0
    if offered >= seats:
        return math.inf
    beta = (seats - offered) / math.sqrt(offered)
    if beta > HALFIN_WHITT_NEVER_WAITS:
        return 0.0
    cdf = 0.5 * math.erfc(-beta / math.sqrt(2.0))
    pdf = math.exp(-beta * beta / 2.0) / math.sqrt(2.0 * math.pi)
    waiting = 1.0 / (1.0 + beta * cdf / pdf)
    if waiting <= TAIL_PROBABILITY:
        return 0.0
    return math.log(waiting / TAIL_PROBABILITY) * hold_s / (2.0 * (seats - offered))


def _tpot_p99_s(lane: _Lane, rate_rps: float, dec: _Decode) -> float:
    """Mean TPOT plus the compound-Poisson P99 excess of one request's mean step (module docstring)."""
    gaps = max(lane.output_tokens - 1, 1)
    life_s = gaps * dec.tpot_s
    slope = (lane.decode_s(1.0 + dec.others + SLOPE_STEP) - dec.step_s) / SLOPE_STEP
    if 1.0 + dec.others >= lane.seats:
        slope = 0.0
    stretch = 1.0 / (1.0 - dec.share)
    b, p = slope * stretch, dec.extra_s * stretch / gaps  # per arrival: batch, prefill
    m = rate_rps * life_s
    branching = (1.0 + 2.0 * dec.share) / (1.0 - dec.share)  # generalised Poisson vs Poisson, κ3 at equal κ2
    var = m * (b * b * 2.0 / 3.0 + b * p + p * p) + dec.behind_var * (b + p) ** 2
    third = m * (b**3 / 2.0 + 3.0 * b * b * p / 3.0 + 3.0 * b * p * p / 2.0 + p**3 * branching)
    third += dec.behind_var * (b + p) ** 3
    if var <= 0.0:
        return dec.tpot_s
    sigma = math.sqrt(var)
    skew = third / sigma**3
    gain = 1.0 / max(1.0 - rate_rps * gaps * b, MIN_FEEDBACK_MARGIN)
    return dec.tpot_s + gain * sigma * (Z99 + (Z99 * Z99 - 1.0) / 6.0 * skew)


def tail_estimate(
    replica: ReplicaModel, *, input_tokens: int, output_tokens: int, rate_rps: float
) -> TailEstimate:
    """Predicted P99 TTFT/TPOT/E2E of one replica of ``replica`` at a Poisson ``rate_rps`` of requests
    of ``input_tokens`` prompt and ``output_tokens`` answer tokens (module docstring)."""
    return _estimate(_lane(replica, input_tokens, output_tokens), rate_rps)


def _estimate(lane: _Lane, rate_rps: float, start: float = 0.0, above: float | None = None) -> TailEstimate:
    """The estimate at ``rate_rps``; ``start`` and ``above`` bound the decode fixed point (``_decode_fixed_point``)."""
    dec = _decode_fixed_point(lane, rate_rps, start, above)
    if isinstance(dec, str):
        return _unstable(rate_rps, dec)
    others = dec.others
    queue, own_s = lane.queue(rate_rps, others, *lane.prompt_steps_s(others))
    busy = 1.0 - math.exp(-(others + rate_rps * own_s))
    residual_s = busy * lane.replica.step.step_of_tpot_s(dec.tpot_s) / 2.0  # half the step in progress
    queue_s = packed_wait_p99_s(queue)
    if not math.isfinite(queue_s):
        return _unstable(rate_rps, "prefill queue")
    ttft_mean_s = own_s + residual_s + first_token_delay_s(lane.replica.step, others, dec.tpot_s)
    gaps = max(lane.output_tokens - 1, 0)
    hold_s = ttft_mean_s + gaps * dec.tpot_s
    offered = rate_rps * hold_s
    if offered + Z999 * math.sqrt(offered) > lane.kv_seats:
        return _unstable(rate_rps, "KV pool (preemptions)")
    seat_s = seat_wait_p99_s(offered=offered, seats=lane.seats, hold_s=hold_s)
    if not math.isfinite(seat_s):
        return _unstable(rate_rps, "batch limit")
    ttft_s = ttft_mean_s + queue_s + seat_s
    tpot_s = _tpot_p99_s(lane, rate_rps, dec)
    e2e_s = hold_s + math.hypot(ttft_s - ttft_mean_s, gaps * (tpot_s - dec.tpot_s))
    ms = MS_PER_S
    return TailEstimate(rate_rps, ttft_s * ms, tpot_s * ms, e2e_s * ms, others, stable=True)


def _meets(est: TailEstimate, slo: Sla) -> bool:
    checks = (
        (est.ttft_p99_ms, slo.ttft_p99_ms),
        (est.tpot_p99_ms, slo.tpot_p99_ms),
        (est.e2e_p99_ms, slo.e2e_p99_ms),
    )
    return est.stable and all(limit is None or value <= limit for value, limit in checks)


def _excess(est: TailEstimate, slo: Sla) -> float:
    """The largest predicted P99 over its limit, minus 1 (≤ 0 inside every limit); inf past a stability
    limit. What the rate search interpolates on."""
    if not est.stable:
        return math.inf
    checks = (
        (est.ttft_p99_ms, slo.ttft_p99_ms),
        (est.tpot_p99_ms, slo.tpot_p99_ms),
        (est.e2e_p99_ms, slo.e2e_p99_ms),
    )
    ratios = [value / limit if limit > 0 else math.inf for value, limit in checks if limit is not None]
    return max(ratios, default=0.0) - 1.0


def tail_max_rate(
    replica: ReplicaModel,
    *,
    input_tokens: int,
    output_tokens: int,
    slo: Sla,
    enough: Callable[[float, float], bool] | None = None,
) -> float:
    """The highest Poisson rate (req/s) one replica sustains with its predicted P99s inside the SLO's
    P99 limits; 0 when even a lone request misses them. Every predicted P99 rises with the rate, and the
    stability limits bound the bracket [0, top]; the answer is the highest passing rate on the grid of
    ``RATE_GRID`` steps of that bracket (``_highest_passing``). ``enough(lo, hi)``, given a passing
    rate lo > 0 and the highest the answer can still be, may stop the search early and return lo
    (e.g. once both give the same replica count)."""
    lane = _lane(replica, input_tokens, output_tokens)
    lone = _estimate(lane, 0.0)
    if not _meets(lone, slo):
        return 0.0
    top = lane.seats / max(lane.lone_prefill_s + (output_tokens - 1) * lane.decode_s(lane.seats), 1e-12)
    while _estimate(lane, top).stable:  # the model's own stability bound is finite: climb to it
        top *= 2.0
    return _highest_passing(lane, slo, top, _excess(lone, slo), enough)


def _highest_passing(
    lane: _Lane,
    slo: Sla,
    top_rps: float,
    excess_at_zero: float,
    enough: Callable[[float, float], bool] | None,
) -> float:
    """The highest rate j·top/``RATE_GRID`` whose estimate meets the SLO (``tail_solve.highest_passing``,
    the point a bisection of [0, top] finds). Every rate tried lies between the highest that passed and
    the lowest that failed, so their decode batches bound its fixed point (n* rises with the rate)."""
    step = top_rps / RATE_GRID
    below: list[float] = [0.0]  # batch at the highest rate passed so far
    above: dict[int, float] = {}  # batch at each stable rate that failed

    def test(j: int) -> tuple[bool, float]:
        upper = min((n for i, n in above.items() if i > j), default=None)
        est = _estimate(lane, j * step, below[0], upper)
        passed = _meets(est, slo)
        if passed:
            below[0] = max(below[0], est.decode_batch)
        elif est.stable:
            above[j] = est.decode_batch
        return passed, _excess(est, slo)

    def done(lo: int, hi: int) -> bool:
        return enough is not None and lo > 0 and enough(lo * step, (hi - 1) * step)

    return highest_passing(test, grid=RATE_GRID, excess_at_zero=excess_at_zero, enough=done) * step

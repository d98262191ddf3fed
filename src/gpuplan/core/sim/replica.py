"""One simulated serving replica: a continuous-batching scheduler over a paged KV cache.

Each engine step (Yu et al. 2022 "Orca" iteration-level scheduling; vLLM V1 scheduler):

1. the running sequences each need one more KV slot; if the pool is short, the most recently admitted
   sequence is preempted (vLLM's LIFO policy), by recompute (back to the head of the queue, its prompt
   and generated tokens are prefilled again) or by swap (KV copied to host memory and back);
2. each running sequence decodes one token; the rest of the step's token budget
   (``max_batched_tokens``) goes to prefill chunks, first of partly prefilled prompts, then of new
   requests admitted in arrival order while ``max_num_seqs`` and the KV pool allow (chunked prefill).
   Without chunked prefill a step is either whole prompts only (decodes pause, vLLM V0) or decode only;
3. the step lasts ``step_s(decodes, context, chunk tokens, prompt length)`` of the core step model
   (``perf/roofline.py``): decodes and prefill chunks share one pass over the weights. Step times are
   memoised by their integer arguments.

Per-sequence context for the decode step is each sequence's life-mean context ``prompt + output/2``
(the analytic model's choice, ``perf/scenarios.py``): in steady state the mean current context of a
batch equals it, a single request reproduces the analytic latency exactly, and the step time depends
on two integers only, so it memoises well. KV occupancy, by contrast, follows the real current length.

No per-token Python objects: a sequence's finish step is known when it joins the batch
(``join + remaining tokens``) and sits in a heap. Inter-token gaps are counted per step, not per token:
every sequence that decoded in a replica's previous decode step waited the time between the two
decode steps' ends (prefill-only steps in between included); a sequence that joined since then
(after its prefill, a KV hand-off, a swap-in) waited from its own last token. So each request's gaps
sum exactly to its last-token minus first-token time.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

from gpuplan.core.sim.records import Book, Timeline
from gpuplan.core.sim.step_times import StepTimes

Role = Literal["mixed", "prefill", "decode"]


@dataclass(frozen=True)
class ReplicaLimits:
    """What bounds one replica's batch: KV pool (tokens), sequences, tokens per step, and policies."""

    kv_tokens: float
    max_context: int
    max_seqs: int
    max_tokens: int
    block_tokens: int
    state_tokens: float
    """A sequence's fixed recurrent (Mamba) state, in KV-token equivalents (0 for transformers)."""
    chunked: bool
    hit_rate: float
    reserve_full: bool
    swap: bool
    swap_s_per_token: float
    ahead: bool = False
    """The engine plans each step during the previous one: a step admits only requests that reached
    the engine before the previous step began (``engine_profiles.schedules_ahead``)."""
    host_s: float = 0.0
    """Host time between a request's send and the engine seeing it (``StepModel.first_token_host_s``)."""
    plan_s: float = 0.0
    """The host's planning of a step (``StepModel.overhead_s``): hidden behind the previous step where
    ``ahead``, paid in full by the first step after the engine idled."""


class Replica:
    """A serving replica; ``role`` 'prefill' hands finished prompts off, 'decode' takes them."""

    def __init__(self, book: Book, times: StepTimes, limits: ReplicaLimits, role: Role, record: bool) -> None:
        self.book, self.times, self.lim, self.role, self.record = book, times, limits, role, record
        self.waiting: deque[int] = deque()
        self.ready: deque[int] = deque()
        self.prefilling: deque[int] = deque()
        self.pf_left: dict[int, int] = {}
        self.running: dict[int, int] = {}  # request -> decode step it joined at
        self.heap: list[tuple[int, int, int]] = []
        self.dsteps = 0
        self.ctx2 = 0
        self.kv_used = 0.0
        self.busy_until = math.inf
        self.timeline = Timeline()
        self._chunk: list[tuple[int, int]] = []
        self._n_dec = 0
        self._dt = 0.0
        self._preempted = 0
        self.c0: dict[int, int] = {}
        self.phase = [0] * limits.block_tokens
        self.fresh: dict[int, None] = {}
        self.swapped: set[int] = set()
        self.last_decode_s = math.nan
        self.began = 0.0

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.ready) + len(self.prefilling) + len(self.running)

    def fits_alone(self, rid: int) -> bool:
        """Whether the request could ever run here: its whole context fits the deployment's
        ``max_model_len`` (an engine answers longer requests with an error) and the empty KV pool."""
        context = self.book.inp[rid] + self.book.out[rid]
        return context <= self.lim.max_context and self._slots(context) <= self.lim.kv_tokens

    # --- planning a step ---------------------------------------------------------------------------

    def plan(self, now: float) -> float | None:
        """Choose the next step's work; its duration, or None when there is nothing to do."""
        extra_s = self._admit_ready(now)
        n_dec = len(self.running)
        self._preempted = 0
        if n_dec and not self.lim.reserve_full:
            extra_s += self._make_room()
            n_dec = len(self.running)
        chunk: list[tuple[int, int]] = []
        growth = self._growth()
        ahead = self.lim.ahead and self.busy_until != math.inf  # an idle engine plans at once
        if self.role != "decode" or self.waiting:  # a decode replica recomputes its own preempted
            budget = self.lim.max_tokens - (n_dec if self.lim.chunked else 0)
            chunk = self._plan_prefill(budget, now, growth, self.began if ahead else math.inf)
            if not chunk and not n_dec and ahead:  # nothing planned ahead: the engine idles, then plans
                chunk = self._plan_prefill(budget, now, growth, math.inf)
                ahead = False
            if chunk and not self.lim.chunked:
                n_dec = 0
        if not n_dec and not chunk:
            return None
        self._chunk, self._n_dec, self.began = chunk, n_dec, now
        if n_dec:
            self.kv_used += growth
        step_s = self._step_time(chunk, n_dec)
        if self.lim.ahead and not ahead:  # a step planned on an idle engine: nothing hid its planning
            step_s += min(self.lim.plan_s, step_s)
        self._dt = extra_s + step_s
        return self._dt

    def _step_time(self, chunk: list[tuple[int, int]], n_dec: int) -> float:
        """Duration of a step of ``n_dec`` decodes and a prefill ``chunk`` (core model, memoised)."""
        context = self.ctx2 // (2 * n_dec) if n_dec else 0
        if not chunk:
            return self.times.decode_s(n_dec, context)
        tokens = 0
        weighted = 0
        cached = 0
        for rid, take in chunk:
            tokens += take
            weighted += take * (self.book.inp[rid] + self.book.gen[rid])
            cached += take * self._cached(rid)
        prompt = max(round(weighted / tokens), 1)
        hit = min(round(cached / tokens), prompt - 1)
        if not n_dec:
            return self.times.prefill_s(tokens, prompt, hit)
        return self.times.mixed_s(n_dec, context, tokens, prompt, hit)

    def _cached(self, rid: int) -> int:
        """Prompt tokens of a request found in the prefix cache: on first admission only (a recompute
        after preemption prefills its whole context, ``_prefill_work``)."""
        b = self.book
        return 0 if b.gen[rid] or not self.lim.hit_rate else b.inp[rid] - self._prefill_work(rid)

    def _tokens(self, rid: int) -> int:
        """KV tokens a request holds when admitted (prompt + generated so far, or its whole context)."""
        b = self.book
        return b.inp[rid] + b.out[rid] if self.lim.reserve_full else b.inp[rid] + max(b.gen[rid] - 1, 0)

    def _slots(self, tokens: int) -> float:
        """KV slots of ``tokens`` in whole pages, plus the sequence's fixed recurrent state."""
        block = self.lim.block_tokens
        return -(-tokens // block) * block + self.lim.state_tokens

    def _growth(self) -> int:
        """Slots this step's decodes allocate: one page for each running sequence whose pages are full.

        A sequence that joined at decode step j holding c0 tokens needs a page before decode step t
        exactly when c0 + (t − j) is a multiple of the page size; ``phase`` counts running sequences
        by (c0 − j) mod page, so the count is one lookup (no per-sequence work)."""
        if self.lim.reserve_full:
            return 0
        block = self.lim.block_tokens
        return self.phase[-self.dsteps % block] * block

    def _release(self, rid: int, join: int) -> float:
        """Slots a leaving sequence frees (its pages now, or all it reserved), and its phase entry."""
        c0 = self.c0.pop(rid)
        if self.lim.reserve_full:
            return self._slots(c0)
        self.phase[(c0 - join) % self.lim.block_tokens] -= 1
        return self._slots(c0 + self.dsteps - join)

    def _admit_ready(self, now: float) -> float:
        """Requests whose KV exists elsewhere (swapped out, or handed off by a prefill replica)."""
        cost = 0.0
        lim = self.lim
        while self.ready and len(self.running) + len(self.prefilling) < lim.max_seqs:
            rid = self.ready[0]
            tokens = self._tokens(rid)
            need = self._slots(tokens)
            own = lim.block_tokens if not lim.reserve_full and tokens % lim.block_tokens == 0 else 0
            if self.kv_used + need + self._growth() + own > lim.kv_tokens:  # room for this step's pages too
                break
            self.ready.popleft()
            self._allocate(rid, tokens, need, now)
            if rid in self.swapped:  # a KV hand-off already paid its transfer on the way in
                self.swapped.discard(rid)
                cost += need * lim.swap_s_per_token
            self._join(rid)
        return cost

    def _plan_prefill(self, budget: int, now: float, growth: int, seen_by: float) -> list[tuple[int, int]]:
        """This step's prefill chunk: partly prefilled prompts first, then new admissions, among the
        requests the engine saw by ``seen_by``, while the KV pool keeps ``growth`` slots free for this
        step's decodes. A step that preempted admits nothing new (vLLM's scheduler), or the victim would
        be readmitted at once and evicted again."""
        chunk: list[tuple[int, int]] = []
        for rid in self.prefilling:
            if budget <= 0:
                return chunk
            take = min(self.pf_left[rid], budget)
            chunk.append((rid, take))
            budget -= take
        lim = self.lim
        admit = not self._preempted
        while (
            admit and budget > 0 and self.waiting and len(self.running) + len(self.prefilling) < lim.max_seqs
        ):
            rid = self.waiting[0]
            tokens = self._tokens(rid)
            need = self._slots(tokens)
            work = self._prefill_work(rid)
            if self.kv_used + need + growth > lim.kv_tokens or (not lim.chunked and chunk and work > budget):
                break
            if self.book.arrival_s[rid] + lim.host_s > seen_by:
                break
            self.waiting.popleft()
            self._allocate(rid, tokens, need, now)
            self.prefilling.append(rid)
            self.pf_left[rid] = work
            take = work if not lim.chunked else min(work, budget)
            chunk.append((rid, take))
            budget -= take
        return chunk

    def _allocate(self, rid: int, tokens: int, need: float, now: float) -> None:
        """An admitted request takes ``need`` KV slots holding ``tokens``; its first admission (its
        scheduled time is still NaN) stamps ``now`` as that time."""
        self.kv_used += need
        self.c0[rid] = tokens
        scheduled = self.book.scheduled_s
        if scheduled[rid] != scheduled[rid]:
            scheduled[rid] = now

    def _prefill_work(self, rid: int) -> int:
        """Prompt tokens to compute: the uncached share of the prompt (prefix cache) on first admission,
        the whole context (prompt + generated) on a recompute after preemption."""
        b = self.book
        if b.gen[rid]:
            return b.inp[rid] + b.gen[rid]
        return max(math.ceil(b.inp[rid] * (1.0 - self.lim.hit_rate)), 1)

    def _make_room(self) -> float:
        """Preempt the newest running sequences until every running one gets its next KV slot."""
        cost = 0.0
        b = self.book
        while self.running and self.kv_used + self._growth() > self.lim.kv_tokens:
            rid = next(reversed(self.running))
            join = self.running.pop(rid)
            grown = self.dsteps - join
            freed = self._release(rid, join)
            b.gen[rid] += grown
            if grown:  # it decoded here since joining: its last token came with the last decode step
                b.last_s[rid] = self.last_decode_s
            self.fresh.pop(rid, None)
            self.kv_used -= freed
            self.ctx2 -= 2 * b.inp[rid] + b.out[rid]
            b.epoch[rid] += 1
            b.preemptions[rid] += 1
            self._preempted += 1
            if self.lim.swap:
                cost += freed * self.lim.swap_s_per_token
                self.swapped.add(rid)
                self.ready.appendleft(rid)
            else:
                self.waiting.appendleft(rid)
        return cost

    # --- completing a step -------------------------------------------------------------------------

    def complete(self, t: float, finished: list[int], handoff: list[int]) -> None:
        """Apply the planned step ending at ``t``; append finished and handed-off request ids."""
        if self._n_dec:
            self.dsteps += 1
            self._decode_gaps(t)
            self._pop_finished(t, finished)
        for rid, take in self._chunk:
            left = self.pf_left[rid] - take
            if left > 0:
                self.pf_left[rid] = left
                continue
            del self.pf_left[rid]
            self.prefilling.remove(rid)
            self._prefilled(rid, t, finished, handoff)
        if self.record:
            self._record(t)
        self._chunk = []

    def _decode_gaps(self, t: float) -> None:
        """Inter-token gaps of the decode step ending at ``t`` (module docstring)."""
        regular = self._n_dec - len(self.fresh)
        if self.record:
            tl, last = self.timeline, self.book.last_s
            tl.gap_s.append(t - self.last_decode_s if regular else 0.0)
            tl.gap_n.append(regular)
            for rid in self.fresh:
                tl.rejoin_t_s.append(t)
                tl.rejoin_gap_s.append(t - last[rid])
        self.fresh.clear()
        self.last_decode_s = t

    def _record(self, t: float) -> None:
        tl = self.timeline
        tl.t_s.append(t)
        tl.dt_s.append(self._dt)
        tl.decode.append(self._n_dec)
        tl.prefill_tokens.append(sum(take for _, take in self._chunk))
        tl.kv_fraction.append(self.kv_used / self.lim.kv_tokens)
        tl.queued.append(len(self.waiting) + len(self.ready))
        tl.preempted.append(self._preempted)
        if not self._n_dec:
            tl.gap_s.append(0.0)
            tl.gap_n.append(0)

    def _pop_finished(self, t: float, finished: list[int]) -> None:
        heap, b = self.heap, self.book
        while heap and heap[0][0] <= self.dsteps:
            _, rid, epoch = heapq.heappop(heap)
            if epoch != b.epoch[rid] or rid not in self.running:
                continue
            join = self.running.pop(rid)
            self.ctx2 -= 2 * b.inp[rid] + b.out[rid]
            self.kv_used -= self._release(rid, join)
            b.gen[rid] = b.out[rid]
            b.finish_s[rid] = t
            finished.append(rid)

    def _prefilled(self, rid: int, t: float, finished: list[int], handoff: list[int]) -> None:
        b = self.book
        b.gen[rid] += 1
        if b.first_s[rid] != b.first_s[rid]:
            b.first_s[rid] = t
        elif self.record:  # a recompute after preemption emits the request's next token
            self.timeline.rejoin_t_s.append(t)
            self.timeline.rejoin_gap_s.append(t - b.last_s[rid])
        b.last_s[rid] = t
        if b.gen[rid] >= b.out[rid] or self.role == "prefill":
            self.kv_used -= self._slots(self.c0.pop(rid))
            if b.gen[rid] >= b.out[rid]:
                b.finish_s[rid] = t
                finished.append(rid)
            else:
                handoff.append(rid)
            return
        self._join(rid)

    def _join(self, rid: int) -> None:
        b = self.book
        self.running[rid] = self.dsteps
        self.fresh[rid] = None
        if not self.lim.reserve_full:
            self.phase[(self.c0[rid] - self.dsteps) % self.lim.block_tokens] += 1
        self.ctx2 += 2 * b.inp[rid] + b.out[rid]
        heapq.heappush(self.heap, (self.dsteps + b.out[rid] - b.gen[rid], rid, b.epoch[rid]))

"""What a simulation records: each request's life (``Book``) and each replica's steps (``Timeline``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Book:
    """Per-request state shared by all replicas (plain lists: scalar access is what the loop does)."""

    arrival_s: list[float]
    inp: list[int]
    out: list[int]
    gen: list[int] = field(init=False)
    first_s: list[float] = field(init=False)
    finish_s: list[float] = field(init=False)
    scheduled_s: list[float] = field(init=False)
    preemptions: list[int] = field(init=False)
    epoch: list[int] = field(init=False)
    last_s: list[float] = field(init=False)

    def __post_init__(self) -> None:
        """Every request starts with nothing generated and no time stamped (NaN until it happens)."""
        n = len(self.inp)
        nan = math.nan
        self.gen, self.first_s, self.finish_s = [0] * n, [nan] * n, [nan] * n
        self.scheduled_s, self.preemptions, self.epoch = [nan] * n, [0] * n, [0] * n
        self.last_s = [nan] * n


@dataclass
class Timeline:
    """One row per engine step: end time, duration, decoding sequences, prefill tokens, KV use, load,
    preemptions, and the step's inter-token gap (``gap_s``, shared by ``gap_n`` sequences); plus the
    gaps of sequences that rejoined decoding (``rejoin_t_s`` when, ``rejoin_gap_s`` how long)."""

    t_s: list[float] = field(default_factory=list)
    dt_s: list[float] = field(default_factory=list)
    decode: list[int] = field(default_factory=list)
    prefill_tokens: list[int] = field(default_factory=list)
    kv_fraction: list[float] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    gap_s: list[float] = field(default_factory=list)
    gap_n: list[int] = field(default_factory=list)
    rejoin_t_s: list[float] = field(default_factory=list)
    rejoin_gap_s: list[float] = field(default_factory=list)

"""Timing of one device operation: warm-up, loops long enough to time, median of repeats.

On CUDA each repeat is bracketed by CUDA events (device time, no host jitter); on CPU by
``time.perf_counter``. A repeat runs the op ``iters`` times, chosen from a warm-up timing so that
one repeat lasts at least ``min_repeat_s`` (event resolution is ~0.5 µs, launch overhead ~5 µs).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    max_s: float
    repeats: int
    iters: int


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _once(fn: Callable[[], object], device: torch.device, iters: int) -> float:
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def time_op(
    fn: Callable[[], object], device: torch.device, *, warmup: int, repeats: int, min_repeat_s: float
) -> Timing:
    """Seconds per call of ``fn``: median (and min, max) over ``repeats`` timed repeats."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    probe = _once(fn, device, 1)
    iters = max(1, min(10_000, math.ceil(min_repeat_s / probe))) if probe > 0 else 1
    samples = [_once(fn, device, iters) for _ in range(repeats)]
    return Timing(statistics.median(samples), min(samples), max(samples), repeats, iters)

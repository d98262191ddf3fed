"""Open-loop send schedules: offsets (seconds from the start) of every request.

The count is fixed: ``N = round(rate · (warmup + duration))`` requests. For ``poisson`` the N times
are sorted uniform draws on the window, which is exactly a Poisson process conditioned on N arrivals
(so the run does not add the ±√N sampling noise of a free Poisson count to the rate it measures);
``gamma`` draws N gamma(k) gaps and rescales them onto the window (k < 1 is burstier, k = 1 is
Poisson-like); ``constant`` is ``i / rate``.

``num_prompts`` (``--num-prompts N``) fixes the count instead: ``N`` requests on a window of ``N / rate``
seconds, cut at ``warmup + duration`` when that is shorter; ``all_at_once`` (``--request-rate inf``)
sends all ``N`` at offset 0 (with ``--max-concurrency`` they then go as slots free up, as in
``vllm bench serve``).
"""

from __future__ import annotations

import numpy as np

from gpuplan.adapters.bench.load.config import LoadConfig


def offsets_s(config: LoadConfig) -> list[float]:
    """Sorted send offsets in seconds, within ``[0, warmup + duration)``."""
    limit = min(config.num_prompts or config.max_requests, config.max_requests)
    if config.all_at_once:
        return [0.0] * limit
    assert config.rate_rps is not None
    window = config.warmup_s + config.duration_s
    if config.num_prompts is not None:
        window = min(window, config.num_prompts / config.rate_rps)
    count = min(round(config.rate_rps * window), limit)
    if count <= 0:
        return []
    rng = np.random.default_rng(config.seed)
    if config.arrival == "constant":
        times = np.arange(count) / config.rate_rps
    elif config.arrival == "poisson":
        times = np.sort(rng.uniform(0.0, window, count))
    else:
        gaps = rng.gamma(config.burstiness, 1.0, count + 1)
        times = np.cumsum(gaps)[:-1] / gaps.sum() * window
    return [float(t) for t in times]

"""Open-loop send schedules: offsets (seconds from the start) of every request.

The count is fixed: ``N = round(rate · (warmup + duration))`` requests. For ``poisson`` the N times
are sorted uniform draws on the window, which is exactly a Poisson process conditioned on N arrivals
(so the run does not add the ±√N sampling noise of a free Poisson count to the rate it measures);
``gamma`` draws N gamma(k) gaps and rescales them onto the window (k < 1 is burstier, k = 1 is
Poisson-like); ``constant`` is ``i / rate``.
"""

from __future__ import annotations

import numpy as np

from gpuplan.adapters.bench.load.config import LoadConfig


def offsets_s(config: LoadConfig) -> list[float]:
    """Sorted send offsets in seconds, within ``[0, warmup + duration)``."""
    assert config.rate_rps is not None
    window = config.warmup_s + config.duration_s
    count = min(round(config.rate_rps * window), config.max_requests)
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

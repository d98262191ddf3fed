"""The mock's own lateness: how far behind its schedule each token write went out.

A fixed histogram (0.1 ms bins up to 1 s, one overflow bin) keeps recording O(1) and memory bounded at
any rate; percentiles are read from it with 0.1 ms resolution.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any

FINISHED_REASONS = ("stop", "length", "abort")
"""vLLM's ``finished_reason`` label values of ``vllm:request_success_total``, each exposed from 0 as
vLLM does (https://docs.vllm.ai/en/latest/usage/metrics.html)."""
BIN_MS = 0.1
BINS = 10_000
VLLM_HISTOGRAMS_URL = "https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/loggers.py"
"""Where vLLM defines the histograms below and their buckets (seconds)."""
REQUEST_LATENCY_BUCKETS_S = (
    *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0),
    *(60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
)
HISTOGRAM_BUCKETS_S: dict[str, tuple[float, ...]] = {
    "vllm:time_to_first_token_seconds": (
        *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75),
        *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    ),
    "vllm:inter_token_latency_seconds": (
        *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75),
        *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
    ),
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY_BUCKETS_S,
    "vllm:request_queue_time_seconds": REQUEST_LATENCY_BUCKETS_S,
}
"""vLLM's request histograms, with vLLM's buckets (``VLLM_HISTOGRAMS_URL``), so a client reading the mock
reads what it would read from vLLM."""


class Histogram:
    """A Prometheus histogram: one count per bucket (O(log buckets) to observe), the sum and the count."""

    def __init__(self, bounds_s: tuple[float, ...]) -> None:
        self.bounds_s = bounds_s
        self.counts = [0] * (len(bounds_s) + 1)
        self.sum_s = 0.0

    def observe(self, value_s: float) -> None:
        self.counts[bisect_left(self.bounds_s, value_s)] += 1
        self.sum_s += value_s

    def exposition(self, name: str, labels: str) -> list[str]:
        out, cumulative = [f"# TYPE {name} histogram"], 0
        for bound, n in zip((*map(repr, self.bounds_s), "+Inf"), self.counts, strict=True):
            cumulative += n
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(cumulative)}')
        out += [f"{name}_count{{{labels}}} {float(cumulative)}", f"{name}_sum{{{labels}}} {self.sum_s!r}"]
        return out


class LatenessStats:
    """Lateness of token writes (actual − scheduled) and request counters."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.hist = [0] * (BINS + 1)
        self.count = 0
        self.sum_ms = 0.0
        self.max_ms = 0.0
        self.requests = 0
        self.completed = 0
        self.faults: dict[str, int] = {}
        self.max_active = 0
        self.cpu_at_reset = time.process_time()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = dict.fromkeys(FINISHED_REASONS, 0)
        self.histograms = {name: Histogram(bounds) for name, bounds in HISTOGRAM_BUCKETS_S.items()}
        self.ttft = self.histograms["vllm:time_to_first_token_seconds"].observe
        self.itl = self.histograms["vllm:inter_token_latency_seconds"].observe
        self.e2e = self.histograms["vllm:e2e_request_latency_seconds"].observe
        self.queue = self.histograms["vllm:request_queue_time_seconds"].observe

    def record(self, late_ms: float) -> None:
        """One write ``late_ms`` after its due time (negative: early; binned as 0)."""
        self.count += 1
        self.sum_ms += late_ms
        self.max_ms = max(late_ms, self.max_ms)
        self.hist[min(int(max(late_ms, 0.0) / BIN_MS), BINS)] += 1

    def percentile_ms(self, q: float) -> float:
        if not self.count:
            return 0.0
        target = q / 100.0 * self.count
        seen = 0
        for i, n in enumerate(self.hist):
            seen += n
            if seen >= target:
                return (i + 1) * BIN_MS
        return self.max_ms

    def snapshot(self) -> dict[str, Any]:
        return {
            "token_writes": self.count,
            "lateness_ms": {
                "mean": self.sum_ms / self.count if self.count else 0.0,
                "p50": self.percentile_ms(50),
                "p99": self.percentile_ms(99),
                "max": self.max_ms,
            },
            "requests": self.requests,
            "completed": self.completed,
            "faults": dict(self.faults),
            "max_active": self.max_active,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "cpu_s": time.process_time() - self.cpu_at_reset,
        }

    def prometheus(self, running: int, waiting: int, slots: int) -> str:
        """vLLM-named metrics in the Prometheus text format (for ``bench serve --scrape-metrics``);
        ``vllm:kv_cache_usage_perc`` stands for the share of the mock's ``slots`` (``--max-concurrency``) in use."""
        lines = [
            ("vllm:num_requests_running", "gauge", running),
            ("vllm:num_requests_waiting", "gauge", waiting),
            ("vllm:kv_cache_usage_perc", "gauge", running / slots if slots else 0.0),
            ("vllm:prompt_tokens_total", "counter", self.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", self.generation_tokens),
        ]
        out = ["# TYPE vllm:request_success_total counter"]
        out += [
            f'vllm:request_success_total{{finished_reason="{reason}",model_name="mock"}} {float(count)}'
            for reason, count in self.finished.items()
        ]
        for name, kind, value in lines:
            out += [f"# TYPE {name} {kind}", f'{name}{{model_name="mock"}} {float(value)}']
        for name, histogram in self.histograms.items():
            out += histogram.exposition(name, 'model_name="mock"')
        return "\n".join(out) + "\n"

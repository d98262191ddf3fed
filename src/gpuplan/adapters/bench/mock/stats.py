"""The mock's own lateness: how far behind its schedule each token write went out.

A fixed histogram (0.1 ms bins up to 1 s, one overflow bin) keeps recording O(1) and memory bounded at
any rate; percentiles are read from it with 0.1 ms resolution.
"""

from __future__ import annotations

import time
from typing import Any

FINISHED_REASONS = ("stop", "length", "abort")
"""vLLM's ``finished_reason`` label values of ``vllm:request_success_total``, each exposed from 0 as
vLLM does (https://docs.vllm.ai/en/latest/usage/metrics.html)."""
BIN_MS = 0.1
BINS = 10_000


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

    def prometheus(self, running: int, waiting: int) -> str:
        """A few vLLM-named metrics in the Prometheus text format (for ``bench serve --scrape-metrics``)."""
        lines = [
            ("vllm:num_requests_running", "gauge", running),
            ("vllm:num_requests_waiting", "gauge", waiting),
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
        return "\n".join(out) + "\n"

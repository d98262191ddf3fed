"""Latency limits (an SLA), the one vocabulary of every path that checks latency against a limit.

TTFT, TPOT and E2E are defined in docs/metrics.md (TPOT excludes the first token). An ``Sla`` holds
limits on their steady-state **means** (``ttft_ms``, ``tpot_ms``: what ``predict`` and the analytic
``recommend`` compute) and on their **P99s** (``ttft_p99_ms``, ``tpot_p99_ms``, ``e2e_p99_ms``: what
the serving simulator measures, docs/metrics.md "Percentiles"). Goodput (docs/metrics.md "Goodput")
counts a request when its own latencies are within the P99 limits, the per-request test behind them.

Each path checks the limits it can compute: ``recommend`` the means and the TTFT/TPOT P99s, ``simulate``
and its capacity search the P99s, a fleet's classes the means, the load tester's goodput the TTFT/TPOT
P99s per request. A document section refuses a limit its path does not check (:meth:`Sla.only`).
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import Field

from gpuplan.core.frozen import FiniteModel

MAX_TTFT_MS = 3_600_000
"""Sanity cap on a TTFT limit (one hour, the bound ``recommend`` always had): a larger one is a typo."""
MAX_TPOT_MS = 600_000
"""Sanity cap on a TPOT limit (ten minutes per token, the bound ``recommend`` always had)."""
MEAN_LIMITS = ("ttft_ms", "tpot_ms")
P99_LIMITS = ("ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms")


class Sla(FiniteModel):
    """Latency limits in ms, each optional (``None`` = not constrained), finite and > 0.

    Means: ``ttft_ms``, ``tpot_ms``; P99s: ``ttft_p99_ms``, ``tpot_p99_ms``, ``e2e_p99_ms``
    (definitions: docs/metrics.md)."""

    ttft_ms: float | None = Field(default=None, gt=0, le=MAX_TTFT_MS, description="limit on mean TTFT (ms)")
    tpot_ms: float | None = Field(default=None, gt=0, le=MAX_TPOT_MS, description="limit on mean TPOT (ms)")
    ttft_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_TTFT_MS, description="limit on P99 TTFT (ms)"
    )
    tpot_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_TPOT_MS, description="limit on P99 TPOT (ms)"
    )
    e2e_p99_ms: float | None = Field(default=None, gt=0, description="limit on P99 end-to-end latency (ms)")

    @property
    def given(self) -> tuple[str, ...]:
        """The names of the limits set, in field order."""
        return tuple(name for name in (*MEAN_LIMITS, *P99_LIMITS) if getattr(self, name) is not None)

    @property
    def has_means(self) -> bool:
        """Whether a limit on a mean (``ttft_ms``, ``tpot_ms``) is set."""
        return self.ttft_ms is not None or self.tpot_ms is not None

    @property
    def has_percentiles(self) -> bool:
        """Whether a P99 limit is set (these need the serving simulator)."""
        return self.ttft_p99_ms is not None or self.tpot_p99_ms is not None or self.e2e_p99_ms is not None

    @property
    def empty(self) -> bool:
        """No limit at all."""
        return not self.given

    def only(self, checked: Collection[str], by: str) -> Sla:
        """This SLA when every limit it sets is among ``checked``; else ValueError naming the others
        (a limit the path does not check must not pass silently). ``by`` names the path."""
        unchecked = [name for name in self.given if name not in checked]
        if unchecked:
            raise ValueError(f"{by} does not check {', '.join(unchecked)} (only {', '.join(checked)})")
        return self

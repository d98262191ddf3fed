"""Several runs: a sweep of rates, and the highest rate that meets a P99 SLO.

Every step is an ordinary stored run (its own ``run_id``) made by the ``run`` given (the use case
:mod:`gpuplan.usecases.bench_serve` passes its ``serve``).

Max rate under SLO: a step *passes* when its achieved rate is within 1 % of the target, at most 1 %
of its measured requests failed, P99 TTFT **from the scheduled send** is within the SLA's
``ttft_p99_ms`` and P99 TPOT within its ``tpot_p99_ms`` (each limit optional, at least one given; the
search checks no other limit). Starting at ``start_rps`` the rate doubles until
a step fails (halves until one passes when the first fails), then the bracket is bisected until it is
narrower than ``resolution`` (relative) or ``max_steps`` runs were made. The answer is the highest
passing rate (None when none passed).

The rates in req/s keep their JSON keys (``achieved_rate``, ``max_rate_under_slo``) as in
:mod:`gpuplan.adapters.bench.load.summary`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary, stored_rate
from gpuplan.core.sla import Sla

Runner = Callable[[LoadConfig], BenchSummary]
SEARCH_LIMITS = ("ttft_p99_ms", "tpot_p99_ms")
"""The limits a step is judged on (see the module doc)."""


class SloStep(BaseModel):
    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    rate_rps: float
    passed: bool
    run_id: str
    achieved_rate_rps: Annotated[float, stored_rate("achieved_rate")]
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    failed_share: float


class SloSearch(BaseModel):
    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    max_rate_under_slo_rps: Annotated[float | None, stored_rate("max_rate_under_slo")]
    slo_ttft_p99_ms: float | None
    slo_tpot_p99_ms: float | None
    steps: list[SloStep]


def sweep(config: LoadConfig, rates_rps: Sequence[float], run: Runner) -> list[BenchSummary]:
    """One open-loop run per rate, in the order given."""
    return [
        run(
            config.model_copy(
                update={"rate_rps": float(r), "concurrency": None, "trace_path": None, "all_at_once": False}
            )
        )
        for r in rates_rps
    ]


def judge(summary: BenchSummary, rate_rps: float, sla: Sla) -> SloStep:
    """Whether one run at ``rate_rps`` met the SLA's P99 TTFT/TPOT limits (see the module doc)."""
    ttft, tpot = summary.ttft_from_schedule_ms.p99, summary.tpot_ms.p99
    ttft_p99_ms, tpot_p99_ms = sla.ttft_p99_ms, sla.tpot_p99_ms
    failed = summary.requests_failed / max(summary.requests_sent, 1)
    passed = (
        abs(summary.achieved_rate_rps - rate_rps) <= 0.01 * rate_rps
        and failed <= 0.01
        and summary.requests_completed > 0
        and (ttft_p99_ms is None or (ttft is not None and ttft <= ttft_p99_ms))
        and (tpot_p99_ms is None or tpot is None or tpot <= tpot_p99_ms)
    )
    return SloStep(
        rate_rps=rate_rps,
        passed=passed,
        run_id=summary.run_id,
        achieved_rate_rps=summary.achieved_rate_rps,
        ttft_p99_ms=ttft,
        tpot_p99_ms=tpot,
        failed_share=failed,
    )


def _next_rate_rps(
    good_rps: float | None, bad_rps: float | None, rate_rps: float, resolution: float
) -> float | None:
    if bad_rps is None:
        return rate_rps * 2.0
    if good_rps is None:
        return rate_rps / 2.0 if rate_rps / 2.0 >= 0.01 else None
    if bad_rps - good_rps <= resolution * good_rps:
        return None
    return (good_rps + bad_rps) / 2.0


def max_rate_under_slo(
    config: LoadConfig,
    run: Runner,
    *,
    start_rps: float,
    sla: Sla,
    max_steps: int = 8,
    resolution: float = 0.05,
) -> SloSearch:
    """Search the highest rate meeting the SLA's P99 TTFT/TPOT limits with at most ``max_steps`` runs;
    ValueError when it sets neither, or a limit the search does not check."""
    unchecked = [name for name in sla.given if name not in SEARCH_LIMITS]
    if sla.empty or unchecked:
        raise ValueError(
            f"the search checks {' and/or '.join(SEARCH_LIMITS)}; got {', '.join(sla.given) or 'none'}"
        )
    good_rps: float | None = None
    bad_rps: float | None = None
    steps: list[SloStep] = []
    rate_rps: float | None = start_rps
    while rate_rps is not None and len(steps) < max_steps:
        step = judge(sweep(config, [rate_rps], run)[0], rate_rps, sla)
        steps.append(step)
        if step.passed:
            good_rps = rate_rps
        else:
            bad_rps = rate_rps
        rate_rps = _next_rate_rps(good_rps, bad_rps, rate_rps, resolution)
    return SloSearch(
        max_rate_under_slo_rps=good_rps,
        slo_ttft_p99_ms=sla.ttft_p99_ms,
        slo_tpot_p99_ms=sla.tpot_p99_ms,
        steps=steps,
    )

"""What ``bench serve`` prints for its runs of several loads: a sweep of rates (``--rates``), GuideLLM's
``--profile sweep`` and the search of the highest rate under a P99 SLO (``--max-rate-under-slo``); each as
a table, or ``--format json``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.interfaces.cli import render

if TYPE_CHECKING:  # names for the annotations only: the load tester is imported when a command runs
    from gpuplan.adapters.bench.load.config import LoadConfig
    from gpuplan.adapters.bench.load.summary import BenchSummary
    from gpuplan.adapters.bench.load.sweep_profile import SweepResult
    from gpuplan.core.sla import Sla
    from gpuplan.usecases.bench_serve import Hooks


def sweep(
    config: LoadConfig | None, store: str | None, hooks: Hooks, shape: str, rates_rps: list[float]
) -> None:
    from gpuplan.usecases.bench_serve import sweep_rates

    summaries = sweep_rates(config, rates_rps, store, hooks)
    if shape == "json":
        render.emit_json([s.model_dump(mode="json") for s in summaries])
        return
    headers, rows = sweep_rows(summaries)
    render.table("sweep", headers, rows)


def sweep_rows(summaries: list[BenchSummary]) -> tuple[list[str], list[list[object]]]:
    """The columns and rows of a sweep's table, one row per run."""
    goodput = any(s.goodput_rps is not None for s in summaries)
    headers = ["target req/s", "achieved", "ok", "failed", "TTFT p50", "TTFT p99 (sched)", "TPOT p99"]
    headers += ["ITL mean", "out tok/s", *(["goodput req/s"] if goodput else []), "run"]
    rows: list[list[object]] = [
        [
            s.target_rate_rps, s.achieved_rate_rps, s.requests_completed, s.requests_failed, s.ttft_ms.p50,
            s.ttft_from_schedule_ms.p99, s.tpot_ms.p99, s.itl_ms.mean, s.output_tokens_per_s,
            *([s.goodput_rps] if goodput else []), s.run_id[:12],
        ]
        for s in summaries
    ]  # fmt: skip
    return headers, rows


def profile_sweep(config: LoadConfig | None, store: str | None, hooks: Hooks, shape: str, size: int) -> None:
    from gpuplan.usecases.bench_serve import profile_sweep

    result = profile_sweep(config, size, store, hooks)
    if shape == "json":
        render.emit_json(result)
        return
    render.table(f"sweep {result.sweep_id} (--profile sweep)", *profile_rows(result))
    render.console.print(
        f"synchronous {result.synchronous_rate_rps:.2f} req/s, saturation {result.saturation_rate_rps:.2f} req/s "
        f"(completed); {len(result.rates_rps)} rates between; see the curve with: gpuplan results report "
        + " ".join(level.summary.run_id[:12] for level in result.levels if level.strategy == "rate"),
        highlight=False,
    )


def profile_rows(result: SweepResult) -> tuple[list[str], list[list[object]]]:
    """The sweep table: the level and its load before the columns of :func:`sweep_rows`."""
    headers, rows = sweep_rows([level.summary for level in result.levels])
    for row, level in zip(rows, result.levels, strict=True):
        s = level.summary
        closed = f"concurrency {s.concurrency}" if s.mode == "concurrency" else "inf"
        row[0] = level.rate_rps if level.rate_rps is not None else closed
        row.insert(2, level.completed_rate_rps)
        row.insert(0, level.level)
    return ["level", headers[0], headers[1], "completed req/s", *headers[2:]], rows


def slo_search(
    config: LoadConfig | None, store: str | None, hooks: Hooks, shape: str, search: tuple[Sla, int]
) -> None:
    from gpuplan.usecases.bench_serve import max_rate_under_slo

    sla, steps = search
    result = max_rate_under_slo(config, sla, steps, store, hooks)
    if shape == "json":
        render.emit_json(result)
        return
    render.table(
        "max rate under SLO",
        ["rate req/s", "passed", "achieved", "TTFT p99 (sched)", "TPOT p99", "failed share", "run"],
        [
            [
                st.rate_rps,
                "yes" if st.passed else "no",
                st.achieved_rate_rps,
                st.ttft_p99_ms,
                st.tpot_p99_ms,
                st.failed_share,
                st.run_id[:12],
            ]
            for st in result.steps
        ],
    )
    render.console.print(f"max rate under SLO: {result.max_rate_under_slo_rps} req/s", highlight=False)

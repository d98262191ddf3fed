"""From request records to the run's summary (the ``bench serve --format json`` contract).

Warm-up requests are excluded. ``achieved_rate_rps`` is measured sends per second of the measurement
window, stretched when the client sent its last request late; ``ttft_ms``/``e2e_ms`` are from the
actual send and ``*_from_schedule_ms`` from the scheduled send; ``itl_ms`` pools every gap of every
request (vLLM's "ITL") while ``tpot_ms`` is per request (docs/metrics.md).

The rates are written under the JSON keys ``target_rate`` and ``achieved_rate`` (``bench serve
--format json``, the summaries in the results store, docs/bench.md); a summary is read back from
either those keys or the attribute names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.sla import Sla


def stored_rate(json_key: str) -> Any:
    """The field of a rate in req/s written under ``json_key`` (its name less ``_rps``) and read back
    under either name; for ``Annotated[float, stored_rate("achieved_rate")]``."""
    return Field(serialization_alias=json_key, validation_alias=AliasChoices(f"{json_key}_rps", json_key))


class Dist(BaseModel):
    """Mean and percentiles of one metric (None when nothing was measured)."""

    model_config = ConfigDict(frozen=True)

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None


class ClientLateness(BaseModel):
    """The load tester's own lateness: sends behind schedule and event-loop lag."""

    model_config = ConfigDict(frozen=True)

    send_lag_ms: Dist
    sends_late_over_1ms: float
    loop_lag_ms: Dist
    cpu_ms_per_request: float | None = None


class BenchSummary(BaseModel):
    """One run's summary; the two rates keep their JSON keys ``target_rate``/``achieved_rate``."""

    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    run_id: str
    mode: str
    target_rate_rps: Annotated[float | None, stored_rate("target_rate")]
    concurrency: int | None
    duration_s: float
    requests_sent: int
    requests_completed: int
    requests_failed: int
    warmup_excluded: int
    achieved_rate_rps: Annotated[float, stored_rate("achieved_rate")]
    ttft_ms: Dist
    e2e_ms: Dist
    ttft_from_schedule_ms: Dist
    e2e_from_schedule_ms: Dist
    tpot_ms: Dist
    itl_ms: Dist
    input_tokens_mean: float | None
    output_tokens_mean: float | None
    output_tokens_per_s: float
    goodput_rps: float | None
    errors: dict[str, int]
    client: ClientLateness
    server_metrics: dict[str, Any] | None = None
    """The scraped ``/metrics``: ``before``, ``after``, ``delta``, ``timeline`` (every scrape), ``interval_s``."""
    server_vs_client: dict[str, Any] | None = None
    """The server's latencies, counters and load beside the client's (``server_view.side_by_side``)."""
    finish_reasons: dict[str, int] = Field(default_factory=dict)
    """Completed requests by their stream's ``finish_reason`` (``none``: the server sent none)."""
    stopped_early: int = 0
    """Completed requests that stopped before ``max_tokens`` (a ``finish_reason`` other than ``length``)."""
    selected_percentiles: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    """``--percentile-metrics`` at ``--metric-percentiles`` (vLLM's): ``{"ttft_ms": {"p99": ...}}``, keys
    ``p`` + the percentile as written (``p99.9``); from the actual send, as vLLM measures."""
    deployment: dict[str, Any] = Field(default_factory=dict)
    """The GPU, engine and model behind the endpoint, as recorded with the run (flags, else the server)."""
    warnings: list[str] = Field(default_factory=list)
    """What makes the numbers less than they seem: early stops, the client's own event-loop lag."""


LOOP_LAG_WARN_MS = 20.0
"""P99 event-loop lag of the client above which the summary warns that its own delay is in the latencies.
GuideLLM warns on its scheduler's lag the same way (https://github.com/vllm-project/guidellm); 20 ms is
two sampling periods of the lag monitor and several times a healthy loop's P99 (< 2 ms on the mock at
1,000 req/s, docs/bench.md)."""
FULL_LENGTH = "length"
"""The ``finish_reason`` of a stream that stopped at ``max_tokens`` (OpenAI API: ``length``)."""


def dist(values: Sequence[float]) -> Dist:
    if not values:
        return Dist()
    a = np.asarray(values, dtype=float)
    p50, p90, p99 = (float(x) for x in np.percentile(a, [50, 90, 99]))
    return Dist(mean=float(a.mean()), p50=p50, p90=p90, p99=p99, max=float(a.max()))


def _meets_slo(r: RequestRecord, sla: Sla, e2el_ms: float | None) -> bool:
    """Whether one request's TTFT and E2E latency from the scheduled send and its TPOT are within the
    goodput limits (``e2el_ms``: ``--goodput e2el:MS``)."""
    if sla.ttft_p99_ms is not None and (r.ttft_sched_ms is None or r.ttft_sched_ms > sla.ttft_p99_ms):
        return False
    if e2el_ms is not None and (r.e2e_sched_ms is None or r.e2e_sched_ms > e2el_ms):
        return False
    return not (sla.tpot_p99_ms is not None and r.tpot_ms is not None and r.tpot_ms > sla.tpot_p99_ms)


def _goodput_rps(config: LoadConfig, ok: Sequence[RequestRecord], window_s: float) -> float | None:
    """Requests within every goodput limit per second of the window (None: no limit given)."""
    sla, e2el_ms = config.goodput_sla, config.slo_e2el_ms
    if sla.empty and e2el_ms is None:
        return None
    return sum(_meets_slo(r, sla, e2el_ms) for r in ok) / window_s


PERCENTILE_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms"}
"""Each ``--percentile-metrics`` name and the summary field it is."""


def percentile_key(percentile: float) -> str:
    """``p99``, ``p99.9``: the percentile as ``vllm bench serve`` names it (``p99_ttft_ms``), less the metric."""
    return f"p{percentile:g}"


def _selected(config: LoadConfig, ok: Sequence[RequestRecord]) -> dict[str, dict[str, float | None]]:
    values: dict[str, list[float]] = {
        "ttft_ms": [r.ttft_ms for r in ok if r.ttft_ms is not None],
        "tpot_ms": [r.tpot_ms for r in ok if r.tpot_ms is not None],
        "itl_ms": [g for r in ok for g in r.itl_ms],
        "e2e_ms": [r.e2e_ms for r in ok if r.e2e_ms is not None],
    }
    out: dict[str, dict[str, float | None]] = {}
    for name in config.percentile_metrics:
        found = values[PERCENTILE_FIELDS[name]]
        points = (
            np.percentile(found, config.metric_percentiles)
            if found
            else [None] * len(config.metric_percentiles)
        )
        out[PERCENTILE_FIELDS[name]] = {
            percentile_key(p): None if v is None else float(v)
            for p, v in zip(config.metric_percentiles, points, strict=True)
        }
    return out


def _client(
    lags: list[float], loop_lag_ms: Sequence[float], cpu_s: float | None, sent: int
) -> ClientLateness:
    return ClientLateness(
        send_lag_ms=dist(lags),
        sends_late_over_1ms=(sum(x > 1.0 for x in lags) / len(lags) if lags else 0.0),
        loop_lag_ms=dist(list(loop_lag_ms)),
        cpu_ms_per_request=cpu_s * 1e3 / sent if cpu_s is not None and sent else None,
    )


def _window_s(config: LoadConfig, send_span_s: float, done_span_s: float) -> float:
    """The measurement window: the duration (stretched by late sends); a count-bounded run
    (``--num-prompts``) at a rate: its schedule's span, else from the start to the last completion."""
    if config.num_prompts is None:
        return max(config.duration_s, send_span_s)
    if config.rate_rps is not None:
        scheduled_s = min(config.duration_s, config.num_prompts / config.rate_rps)
        return max(scheduled_s, send_span_s, 1e-9)
    return max(done_span_s, send_span_s, 1e-9)


def _latencies(ok: Sequence[RequestRecord]) -> dict[str, Dist]:
    """The latency distributions of the completed requests (ITL: every gap of every request)."""
    return {
        "ttft_ms": dist([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        "e2e_ms": dist([r.e2e_ms for r in ok if r.e2e_ms is not None]),
        "ttft_from_schedule_ms": dist([r.ttft_sched_ms for r in ok if r.ttft_sched_ms is not None]),
        "e2e_from_schedule_ms": dist([r.e2e_sched_ms for r in ok if r.e2e_sched_ms is not None]),
        "tpot_ms": dist([r.tpot_ms for r in ok if r.tpot_ms is not None]),
        "itl_ms": dist([g for r in ok for g in r.itl_ms]),
    }


def _finishes(ok: Sequence[RequestRecord]) -> dict[str, int]:
    return dict(Counter(r.finish_reason or "none" for r in ok))


def _warnings(config: LoadConfig, finishes: dict[str, int], loop_lag: Dist) -> list[str]:
    """The early-stop line (a warning when ``ignore_eos`` was off) and the loop-lag warning."""
    out: list[str] = []
    early = {k: n for k, n in finishes.items() if k not in (FULL_LENGTH, "none")}
    if early:
        reasons = ", ".join(
            f"finish_reason={k}" + (f" x{n}" if len(early) > 1 else "") for k, n in early.items()
        )
        why = (
            "ignore_eos was off, so outputs are shorter than --output-tokens; pass --ignore-eos for fixed lengths"
            if not config.ignore_eos
            else "ignore_eos was sent: the server did not honour it"
        )
        out.append(f"{sum(early.values())} requests stopped before max tokens ({reasons}): {why}")
    if loop_lag.p99 is not None and loop_lag.p99 > LOOP_LAG_WARN_MS:
        out.append(
            f"the client's event loop lagged: P99 {loop_lag.p99:.1f} ms > {LOOP_LAG_WARN_MS:g} ms "
            f"(max {loop_lag.max or 0:.0f} ms); its own delay is in the latencies: give the client "
            "its own cores or more --workers"
        )
    return out


def summarise(
    run_id: str,
    config: LoadConfig,
    records: Sequence[RequestRecord],
    loop_lag_ms: Sequence[float] = (),
    cpu_s: float | None = None,
    session_requests: int = 0,
    server_metrics: dict[str, Any] | None = None,
    deployment: dict[str, Any] | None = None,
) -> BenchSummary:
    """The summary of all measured (non-warm-up) records; latest record per index wins.

    ``cpu_s``: the client's CPU seconds over the ``session_requests`` requests this session sent."""
    latest = {r.index: r for r in sorted(records, key=lambda r: r.done_s)}
    measured = [r for r in latest.values() if not r.warmup]
    ok = [r for r in measured if r.ok]
    start = config.warmup_s
    send_span = max((r.sent_s for r in measured), default=start) - start
    done_span = max((r.done_s for r in ok), default=start) - start
    window = _window_s(config, send_span, done_span)
    out_tokens = sum(r.output_tokens for r in ok)
    lags = [r.send_lag_ms for r in measured] if config.open_loop else []
    client = _client(lags, loop_lag_ms, cpu_s, session_requests)
    finishes = _finishes(ok)
    return BenchSummary(
        run_id=run_id,
        mode=config.mode,
        target_rate_rps=config.rate_rps,
        concurrency=config.concurrency,
        duration_s=config.duration_s,
        requests_sent=len(measured),
        requests_completed=len(ok),
        requests_failed=len(measured) - len(ok),
        warmup_excluded=len(latest) - len(measured),
        achieved_rate_rps=(len(measured) if config.open_loop else len(ok)) / window,
        **_latencies(ok),
        input_tokens_mean=float(np.mean([r.input_tokens for r in ok])) if ok else None,
        output_tokens_mean=out_tokens / len(ok) if ok else None,
        output_tokens_per_s=out_tokens / max(done_span, window, 1e-9),
        goodput_rps=_goodput_rps(config, ok, window),
        errors=dict(Counter(r.error for r in measured if r.error is not None)),
        client=client,
        server_metrics=server_metrics,
        finish_reasons=finishes,
        selected_percentiles=_selected(config, ok),
        deployment=deployment or {},
        stopped_early=sum(n for k, n in finishes.items() if k not in (FULL_LENGTH, "none")),
        warnings=_warnings(config, finishes, client.loop_lag_ms),
    )

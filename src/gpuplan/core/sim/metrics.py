"""Percentiles, throughput, goodput and KV use of a simulation (definitions: docs/metrics.md).

* TTFT = first token − arrival; E2E = last token − arrival; queueing = first scheduled − arrival.
* TPOT = (E2E − TTFT) / (output − 1) per request with output > 1 (first token excluded, as vLLM's
  ``benchmark_serving``, GenAI-Perf and MLPerf define it).
* ITL = each gap between two tokens of one request, pooled over all requests (token-weighted). A
  decode step contributes one gap per sequence: the time since the replica's previous decode step
  for those that decoded in it (prefill-only steps in between included), the time since the
  sequence's own last token for those that rejoined since (after a prefill, KV hand-off, swap-in or
  recompute). Each request's gaps sum to its last − first token time, so the ITL mean equals the
  token-weighted TPOT Σ(E2E − TTFT) / Σ(output − 1). With ``held_token_share`` > 0 the gaps are
  those a client counts when that share of tokens stream with no text (``streamed_chunks.py``).
* mean in system = ∫ requests in system dt over the arrival window / its length; with the arrival
  rate over the same window, Little's law L = λ·W holds in steady state.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.sim.records import Timeline
from gpuplan.core.sim.simulator import SimResult
from gpuplan.core.sim.streamed_chunks import chunk_gaps
from gpuplan.core.sim.workload import FloatArray
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S

PERCENTILES = (50.0, 90.0, 95.0, 99.0)


class Distribution(FrozenModel):
    """Mean and percentiles of one latency, milliseconds (None when no request reached it)."""

    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class SimSummary(FrozenModel):
    """What ``gpuplan simulate`` reports (JSON contract in docs/simulator.md)."""

    requests: int
    completed: int
    rejected: int
    measured: int
    truncated: str | None
    events: int
    sim_time_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    queueing: Distribution
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    goodput_requests_per_s: float | None
    slo_attainment: float | None
    mean_batch: float | None = Field(description="step-time-weighted decoding batch; None without a timeline")
    kv_utilization_mean: float | None = Field(
        description="share of the KV pool in use; None without a timeline"
    )
    kv_utilization_max: float | None
    preemptions: int
    mean_in_system: float
    arrival_rate_rps: float


def distribution(values_s: FloatArray, weights: FloatArray | None = None) -> Distribution:
    """Mean and P50/P90/P95/P99 of seconds, reported in ms; ``weights`` for pooled step gaps."""
    keep = np.isfinite(values_s) if weights is None else np.isfinite(values_s) & (weights > 0)
    values = values_s[keep]
    if values.size == 0:
        return Distribution(mean_ms=None, p50_ms=None, p90_ms=None, p95_ms=None, p99_ms=None)
    if weights is None:
        mean = float(values.mean())
        pct = np.percentile(values, PERCENTILES)
    else:
        w = weights[keep]
        mean = float(np.average(values, weights=w))
        order = np.argsort(values, kind="stable")
        cum = np.cumsum(w[order])
        idx = np.searchsorted(cum, np.asarray(PERCENTILES) / 100.0 * cum[-1])
        pct = values[order][np.minimum(idx, values.size - 1)]
    p50, p90, p95, p99 = (float(v) * MS_PER_S for v in pct)
    return Distribution(mean_ms=mean * MS_PER_S, p50_ms=p50, p90_ms=p90, p95_ms=p95, p99_ms=p99)


def per_request_s(result: SimResult) -> dict[str, FloatArray]:
    """TTFT, TPOT, E2E and queueing delay per request, seconds (NaN where not reached)."""
    ttft = result.first_token_s - result.arrival_s
    e2e = result.finish_s - result.arrival_s
    gaps = (result.output_tokens - 1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(gaps > 0, (result.finish_s - result.first_token_s) / gaps, np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e, "queueing": result.scheduled_s - result.arrival_s}


def _measured_mask(result: SimResult, warmup_fraction: float) -> np.ndarray:
    n = result.arrival_s.size
    skip = int(n * warmup_fraction)
    order = np.argsort(np.nan_to_num(result.arrival_s, nan=np.inf), kind="stable")
    mask = np.zeros(n, dtype=bool)
    mask[order[skip:]] = True
    return mask


def _slo_met(lat: dict[str, FloatArray], slo: Sla) -> np.ndarray:
    ok = np.isfinite(lat["e2e"])
    for key, limit in (("ttft", slo.ttft_p99_ms), ("tpot", slo.tpot_p99_ms), ("e2e", slo.e2e_p99_ms)):
        if limit is not None:
            ok &= np.nan_to_num(lat[key], nan=0.0 if key == "tpot" else np.inf) * MS_PER_S <= limit
    return ok


def summarise(
    result: SimResult, *, slo: Sla | None = None, warmup_fraction: float = 0.0, held_token_share: float = 0.0
) -> SimSummary:
    """Metrics over the requests that arrived after the first ``warmup_fraction`` of them; ITL as a client
    counts it when ``held_token_share`` of the tokens stream with no text (``streamed_chunks.py``)."""
    mask = _measured_mask(result, warmup_fraction)
    lat = {k: v[mask] for k, v in per_request_s(result).items()}
    done = np.isfinite(lat["e2e"])
    arrivals = result.arrival_s[mask]
    start = float(np.nanmin(arrivals)) if np.isfinite(arrivals).any() else 0.0
    end = float(np.nanmax(result.finish_s[mask])) if done.any() else start
    window = max(end - start, 1e-12)
    outputs = result.output_tokens[mask][done]
    inputs = result.input_tokens[mask][done]
    dt, batch, kv, itl, weights = _step_arrays(result, start, held_token_share)
    goodput = attainment = None
    if slo is not None and slo.has_percentiles:  # goodput: each request within the P99 limits
        met = _slo_met(lat, slo)
        goodput = float(met.sum()) / window
        attainment = float(met.sum()) / max(int(mask.sum()), 1)
    all_arrivals = result.arrival_s[np.isfinite(result.arrival_s)]
    span = float(all_arrivals.max() - all_arrivals.min()) if all_arrivals.size > 1 else 0.0
    return SimSummary(
        requests=int(result.arrival_s.size),
        completed=int(np.isfinite(result.finish_s).sum()),
        rejected=result.rejected,
        measured=int(mask.sum()),
        truncated=result.truncated,
        events=result.events,
        sim_time_s=result.sim_time_s,
        ttft=distribution(lat["ttft"]),
        tpot=distribution(lat["tpot"]),
        itl=distribution(itl, weights),
        e2e=distribution(lat["e2e"]),
        queueing=distribution(lat["queueing"]),
        requests_per_s=float(done.sum()) / window,
        output_tokens_per_s=float(outputs.sum()) / window,
        total_tokens_per_s=float(outputs.sum() + inputs.sum()) / window,
        goodput_requests_per_s=goodput,
        slo_attainment=attainment,
        mean_batch=float(np.average(batch, weights=dt)) if batch.size and dt.sum() > 0 else None,
        kv_utilization_mean=float(np.average(kv, weights=dt)) if kv.size and dt.sum() > 0 else None,
        kv_utilization_max=float(kv.max()) if kv.size else None,
        preemptions=int(result.preemptions.sum()),
        mean_in_system=result.in_system_area / span if span > 0 else 0.0,
        arrival_rate_rps=(all_arrivals.size - 1) / span if span > 0 else 0.0,
    )


def _joined(result: SimResult, name: str) -> FloatArray:
    return np.concatenate([np.asarray(getattr(t, name), dtype=np.float64) for t in result.timelines])


def _step_arrays(
    result: SimResult, start: float, held_share: float = 0.0
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Of the steps ending after ``start``: seconds, decoding sequences, KV fraction; and the
    inter-token gaps after ``start`` with how many tokens waited each (module docstring), cut into the
    chunks a client counts when ``held_share`` of the tokens stream with no text."""
    keep = _joined(result, "t_s") > start
    rejoined = _joined(result, "rejoin_t_s") > start
    chunks = [_timeline_chunks(t, start, held_share) for t in result.timelines]
    gaps = np.concatenate([*(c[0] for c in chunks), _joined(result, "rejoin_gap_s")[rejoined]])
    rejoin_n = np.full(int(rejoined.sum()), 1.0 - held_share)
    weights = np.concatenate([*(c[1] for c in chunks), rejoin_n])
    steps = (
        _joined(result, "dt_s")[keep],
        _joined(result, "decode")[keep],
        _joined(result, "kv_fraction")[keep],
    )
    return (*steps, gaps, weights)


def _timeline_chunks(timeline: Timeline, start: float, held_share: float) -> tuple[FloatArray, FloatArray]:
    """One replica's step gaps after ``start`` and their weights, as a client counts them."""
    keep = np.asarray(timeline.t_s, dtype=np.float64) > start
    gap_s = np.asarray(timeline.gap_s, dtype=np.float64)[keep]
    gap_n = np.asarray(timeline.gap_n, dtype=np.float64)[keep]
    return chunk_gaps(gap_s, gap_n, held_share)

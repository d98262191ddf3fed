"""The server's own view of a run beside the client's: latency histograms, token and request counters,
and the load it reported (KV-cache usage, requests running and waiting), from the scraped ``/metrics``
(:mod:`metrics`).

Latencies come from the run's share of each histogram (after − before, all label sets but ``le``
added up): ``count``, ``mean`` = Δsum / Δcount (exact), and ``p50``/``p90``/``p99`` interpolated
linearly inside the bucket that holds the rank, as Prometheus' ``histogram_quantile`` does
(https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile): a percentile
is only as fine as the engine's buckets (vLLM's inter-token buckets start at 10 ms). A rank in the
``+Inf`` bucket reads as the highest finite bound. The client column covers the same requests: those
this session sent, warm-up included (the server counted them too), completed ones only.

Names, first found wins: vLLM's (https://docs.vllm.ai/en/latest/usage/metrics.html; ``vllm:
time_per_output_token_seconds`` is the name of its inter-token histogram before 0.11) and SGLang's
(https://docs.sglang.ai/references/production_metrics.html).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gpuplan.adapters.bench.load.summary import Dist, dist
from gpuplan.adapters.store.records import RequestRecord

HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_ms": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl_ms": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
    ),
    "tpot_ms": ("vllm:request_time_per_output_token_seconds",),
    "e2e_ms": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    "queue_ms": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
}
"""Each latency and the histograms (in seconds) that hold it."""
COUNTERS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "requests": ("vllm:request_success_total", "sglang:num_requests_total"),
}
GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
}
"""Gauges read at each scrape during the run; KV-cache usage is a fraction (vLLM's ``_perc`` is 0–1)
averaged over its label sets (engines), the request counts are added up."""
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _by_name(values: dict[str, float]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples grouped by name, read back from their keys by ``prometheus_client``'s parser."""
    text = "".join(f"{key} {value!r}\n" for key, value in values.items())
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name].append((dict(s.labels), float(s.value)))
    return out


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """``histogram_quantile(q)`` of cumulative ``(upper bound, count)`` buckets sorted by bound, with the
    bounds of the bucket it lies in: ``(value, lower, upper)``; None when the histogram is empty."""
    total = buckets[-1][1] if buckets else 0.0
    finite = [b for b, _ in buckets if b != float("inf")]
    if total <= 0 or not finite:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if bound == float("inf"):
                break
            share = (rank - below) / (cumulative - below) if cumulative > below else 1.0
            return lower + (bound - lower) * share, lower, bound
        lower, below = bound, cumulative
    return finite[-1], finite[-1], float("inf")


def _whole(x: float) -> float | int:
    return int(x) if x.is_integer() else x


def histogram_ms(samples: dict[str, list[tuple[dict[str, str], float]]], base: str) -> dict[str, Any] | None:
    """``count``, ``mean`` and the percentiles (ms) of histogram ``base`` in ``samples`` (a run's delta),
    with ``bucket_ms``: the bounds of the bucket each percentile was interpolated in."""
    count = sum(v for _, v in samples.get(base + "_count", ()))
    if count <= 0:
        return None
    cumulative: dict[float, float] = defaultdict(float)
    for labels, v in samples.get(base + "_bucket", ()):
        cumulative[float(labels["le"])] += v
    buckets = sorted(cumulative.items())
    total_s = sum(v for _, v in samples.get(base + "_sum", ()))
    out: dict[str, Any] = {"count": _whole(count), "mean": total_s / count * 1e3}
    out["bucket_ms"] = {}
    for name, q in QUANTILES.items():
        found = quantile(q, buckets)
        out[name] = None if found is None else found[0] * 1e3
        if found is not None:
            out["bucket_ms"][name] = [found[1] * 1e3, found[2] * 1e3 if found[2] != float("inf") else None]
    return out | {"source": base}


def _first(names: tuple[str, ...], present: Collection[str], suffix: str = "") -> str | None:
    return next((n for n in names if n + suffix in present), None)


def _sample_name(key: str) -> str:
    """The sample name of a key ``name{labels}`` (:func:`metrics.sample_key`)."""
    return key.split("{", 1)[0]


def _gauge(timeline: dict[str, Any], names: tuple[str, ...], average: bool) -> dict[str, Any] | None:
    """Mean and max of a gauge over the scrapes taken during the run (not the before/after ones)."""
    series = timeline.get("series", {})
    name = _first(names, {_sample_name(k) for k in series})
    if name is None:
        return None
    keys = [k for k in series if _sample_name(k) == name]
    points = []
    for i in range(1, len(timeline.get("t_s", ())) - 1):
        values = [series[k][i] for k in keys if series[k][i] is not None]
        if values:
            points.append(sum(values) / len(values) if average else sum(values))
    if not points:
        return None
    return {"mean": sum(points) / len(points), "max": max(points), "scrapes": len(points), "source": name}


def _client(ok: Sequence[RequestRecord]) -> dict[str, Dist]:
    """The client's latencies of the completed requests ``ok``."""
    return {
        "ttft_ms": dist([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        "itl_ms": dist([g for r in ok for g in r.itl_ms]),
        "tpot_ms": dist([r.tpot_ms for r in ok if r.tpot_ms is not None]),
        "e2e_ms": dist([r.e2e_ms for r in ok if r.e2e_ms is not None]),
    }


def side_by_side(
    server_metrics: dict[str, Any] | None, records: Sequence[RequestRecord]
) -> dict[str, Any] | None:
    """Server vs client for the requests of this session (``records``); None without a scrape to read."""
    if not server_metrics or "samples" not in server_metrics.get("after", {}):
        return None
    delta = _by_name(server_metrics.get("delta", {}))
    ok = [r for r in records if r.ok]
    client = _client(ok)
    latency = {}
    for key, names in HISTOGRAMS.items():
        name = _first(names, delta, "_count")
        server = histogram_ms(delta, name) if name else None
        if server is not None:
            seen = client.get(key)
            latency[key] = {"server": server, "client": seen.model_dump() if seen else None}
    totals = {
        "prompt_tokens": sum(r.input_tokens for r in ok),
        "generation_tokens": sum(r.output_tokens for r in ok),
    }
    totals["requests"] = len(ok)
    counters = {}
    for key, names in COUNTERS.items():
        name = _first(names, delta)
        if name is not None:
            total = _whole(sum(v for _, v in delta[name]))
            counters[key] = {"server": total, "client": totals[key], "source": name}
    timeline = server_metrics.get("timeline", {})
    load = {k: g for k, names in GAUGES.items() if (g := _gauge(timeline, names, k == "kv_cache_usage"))}
    return {"latency_ms": latency, "counters": counters, "load": load}

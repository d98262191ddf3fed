"""The server's Prometheus ``/metrics``, scraped before, during and after a run.

Parsed with ``prometheus_client``'s text parser (the exposition format's reference implementation,
https://prometheus.github.io/client_python/), not by hand. Kept: samples whose name starts with
``vllm:`` (vLLM), ``sglang:`` (SGLang) or ``tgi_`` (TGI), histogram buckets included, e.g.
``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``, ``vllm:prompt_tokens_total``,
``vllm:time_to_first_token_seconds_bucket{le="0.005",...}``. Keys are the sample name with its labels
(``name{label="value",...}``, in the order exposed); values are finite floats. ``*_created`` samples
(a series' creation time, not a measurement) are dropped.

A run stores ``{before, after, delta, timeline}``: ``delta`` is after − before for every key in both
(counters and histogram buckets: the run's own share); ``timeline`` holds every scrape (before, each
``interval_s`` during the run, after) as ``t_s`` (seconds since the first) and one aligned list of
values per key (None where a scrape lacked it). The scraping thread parses each scrape it keeps as it
takes it (no raw text is held); on a long run the timeline is thinned (``MAX_TIMELINE_POINTS``) and a
scrape the thinned timeline would drop is not fetched at all. A failed scrape is recorded as an
``error`` (a timeline point whose values are all None), never fails the run.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpuplan.core.redact import redact

PREFIXES = ("vllm:", "sglang:", "tgi_")


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample_key(name: str, labels: dict[str, str]) -> str:
    """``name{a="x",b="y"}`` (``name`` alone without labels), label values escaped as exposed."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{_label_text(v)}"' for k, v in labels.items()) + "}"


def parse(text: str) -> dict[str, float]:
    """The kept samples of a Prometheus text exposition (raises ValueError on a malformed one)."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name.startswith(PREFIXES)
                and not sample.name.endswith("_created")
                and math.isfinite(sample.value)
            ):
                samples[sample_key(sample.name, sample.labels)] = float(sample.value)
    return samples


def fetch(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """``{"text": ...}`` or ``{"error": "..."}`` (the URL's password masked)."""
    try:
        response = httpx.get(url, timeout=timeout_s, trust_env=False)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        return {"error": redact(f"{type(exc).__name__}: {exc}")[:200]}
    return {"text": response.text}


def parsed(fetched: dict[str, Any]) -> dict[str, Any]:
    """A :func:`fetch` result as ``{"samples": {...}}`` or ``{"error": "..."}``."""
    if "text" not in fetched:
        return {"error": fetched.get("error", "no text")}
    try:
        return {"samples": parse(fetched["text"])}
    except ValueError as exc:
        return {"error": f"unparseable Prometheus text: {str(exc)[:160]}"}


def scrape(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """``{"samples": {...}}`` or ``{"error": "..."}``."""
    return parsed(fetch(url, timeout_s))


CUMULATIVE_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
"""Samples of counters and histograms: a series first exposed during the run (a label set a server
creates on its first request) started from 0, as Prometheus' ``increase()`` takes it."""


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Before, after and the delta of every sample in both, and of every counter or histogram sample that
    appeared after the first scrape (from 0); no delta unless both scrapes succeeded."""
    if "samples" not in before or "samples" not in after:
        return {"before": before, "after": after, "delta": {}}
    a, b = before["samples"], after["samples"]
    delta = {
        k: v - a.get(k, 0.0)
        for k, v in b.items()
        if k in a or k.split("{", 1)[0].endswith(CUMULATIVE_SUFFIXES)
    }
    return {"before": before, "after": after, "delta": dict(sorted(delta.items()))}


def timeline(points: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Scrapes ``(t_s, parsed)`` as ``{"t_s": [...], "series": {key: [value or None, ...]}, "errors":
    [{"t_s", "error"}]}`` (the first and last points are the before and after scrapes)."""
    keys = sorted({k for _, p in points for k in p.get("samples", {})})
    series = {k: [p.get("samples", {}).get(k) for _, p in points] for k in keys}
    errors = [{"t_s": t, "error": p["error"]} for t, p in points if "error" in p]
    return {"t_s": [t for t, _ in points], "series": series, "errors": errors}


MAX_TIMELINE_POINTS = 600
"""Scrapes kept for the timeline between the first and the last: a long run keeps every 2^k-th (an hour
at the 1 s default: every 8th), so a run's memory and stored summary stay bounded (a vLLM exposition
has ~500 series: 600 points are ~300,000 numbers)."""


class Scraper:
    """Scrapes ``url`` once at :meth:`start`, every ``interval_s`` in a thread while the run goes on, and
    once at :meth:`stop`, which returns ``{before, after, delta, timeline}``. Each scrape is parsed as it
    is taken (no raw text is kept) and the timeline is thinned to ``MAX_TIMELINE_POINTS``."""

    def __init__(self, url: str, interval_s: float, timeout_s: float = 5.0) -> None:
        self.url, self.interval_s, self.timeout_s = url, interval_s, timeout_s
        self._points: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scrape", daemon=True)
        self._t0 = 0.0
        self._stride = 1
        self._taken = 0

    def _take(self, *, last: bool = False) -> None:
        """One scrape: during the run only every ``_stride``-th is fetched and kept (the others cost
        nothing), and when the kept ones reach twice ``MAX_TIMELINE_POINTS`` every other one (the first
        stays) is dropped and the stride doubles; the ``last`` (after) scrape is always kept."""
        self._taken += 1
        if not last and (self._taken - 1) % self._stride:
            return
        now = time.monotonic()
        self._points.append((round(now - self._t0, 3), parsed(fetch(self.url, self.timeout_s))))
        if not last and len(self._points) >= 2 * MAX_TIMELINE_POINTS:
            self._points = self._points[::2]
            self._stride *= 2

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> Scraper:
        self._t0 = time.monotonic()
        self._take()
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        self._take(last=True)  # the after scrape: always the last point
        points = self._points
        out = compare(points[0][1], points[-1][1])
        out["timeline"] = timeline(points)
        out["interval_s"] = self.interval_s
        return out

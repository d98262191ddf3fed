"""Optional scrape of the server's Prometheus ``/metrics`` before and after a run.

Kept: samples whose name starts with ``vllm:`` (vLLM), ``sglang:`` (SGLang) or ``tgi_`` (TGI), e.g.
``vllm:num_requests_running``, ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
``vllm:request_success_total``, ``vllm:gpu_cache_usage_perc``, ``sglang:num_running_reqs``,
``sglang:gen_throughput``; histogram buckets are dropped (``_sum``/``_count`` stay). Keys are the
sample with its labels, as exposed. ``delta`` is after − before for every key in both (meaningful for
counters). A failed scrape is recorded as an ``error``, never fails the run.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from gpuplan.core.redact import redact

PREFIXES = ("vllm:", "sglang:", "tgi_")


def parse(text: str) -> dict[str, float]:
    """The kept samples of a Prometheus text exposition."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(PREFIXES):
            continue
        if "{" in line:
            end = line.rfind("}") + 1
            key, rest = line[:end], line[end:]
        else:
            key, _, rest = line.partition(" ")
        fields = rest.split()
        name = key.split("{", 1)[0]
        if not fields or name.endswith("_bucket"):
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if math.isfinite(value):
            samples[key.strip()] = value
    return samples


def scrape(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """``{"samples": {...}}`` or ``{"error": "..."}``."""
    try:
        response = httpx.get(url, timeout=timeout_s, trust_env=False)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        return {"error": redact(f"{type(exc).__name__}: {exc}")[:200]}
    return {"samples": parse(response.text)}


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Before, after and the delta of every sample in both."""
    a, b = before.get("samples", {}), after.get("samples", {})
    delta = {k: b[k] - a[k] for k in a.keys() & b.keys()}
    return {"before": before, "after": after, "delta": dict(sorted(delta.items()))}

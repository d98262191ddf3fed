"""The /metrics scraper keeps a bounded timeline: every 2^k-th scrape of a long run, the first and the
last always."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from gpuplan.adapters.bench.load import metrics


def test_a_long_run_keeps_a_thinned_timeline_with_its_first_and_last_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fetches = {"n": 0}

    def fake_fetch(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
        fetches["n"] += 1
        return {"text": f"vllm:num_requests_running {scraper._taken}\n"}  # the scrape's number

    monkeypatch.setattr(metrics, "fetch", fake_fetch)
    monkeypatch.setattr(metrics, "MAX_TIMELINE_POINTS", 4)
    scraper = metrics.Scraper("http://127.0.0.1:1/metrics", interval_s=1e9)
    scraper._take()  # before: the first scrape
    for _ in range(99):
        scraper._take()
    scraper._take(last=True)  # after
    assert fetches["n"] < 101 / 4  # scrapes the thinned timeline drops are never fetched
    values = [p["samples"]["vllm:num_requests_running"] for _, p in scraper._points]
    assert len(values) < 2 * 4 + 1
    assert values[0] == 1 and values[-1] == 101  # the before and after scrapes stay
    assert values == sorted(values)
    steps = {b - a for a, b in pairwise(values[:-1])}  # the kept run scrapes, the after one aside
    assert len(steps) == 1  # evenly thinned: every stride-th scrape

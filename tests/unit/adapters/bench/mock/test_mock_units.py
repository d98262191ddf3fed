"""The mock's HTTP parser, fault table and lateness histogram (no network)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.bench.mock import http as mhttp
from gpuplan.adapters.bench.mock.config import MockConfig
from gpuplan.adapters.bench.mock.stats import LatenessStats


def test_parse_waits_for_the_whole_body_and_keeps_the_rest() -> None:
    raw = b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nHost: x\r\n\r\n{}"
    buf = bytearray(raw[:-1])
    assert mhttp.parse(buf) is None
    buf = bytearray(raw + b"GET /health HTTP/1.1\r\n\r\n")
    req = mhttp.parse(buf)
    assert req is not None and (req.method, req.path, req.json()) == ("POST", "/v1/completions", {})
    nxt = mhttp.parse(buf)
    assert nxt is not None and nxt.path == "/health" and not buf


def test_parse_rejects_garbage() -> None:
    with pytest.raises(mhttp.BadRequest):
        mhttp.parse(bytearray(b"NONSENSE\r\n\r\n"))


def test_chunks_and_sse_are_well_formed() -> None:
    assert mhttp.chunk(b"abc") == b"3\r\nabc\r\n"
    assert mhttp.sse("[DONE]") == b"e\r\ndata: [DONE]\n\n\r\n"


def test_fault_rates_must_sum_to_at_most_one() -> None:
    with pytest.raises(ValueError, match="sum"):
        MockConfig(error_500_rate=0.6, drop_rate=0.6)
    table = MockConfig(error_500_rate=0.1, slow_rate=0.2).fault_table()
    assert [name for name, _ in table] == ["500", "slow"]
    assert [rate for _, rate in table] == pytest.approx([0.1, 0.3])  # cumulative


def test_lateness_percentiles() -> None:
    stats = LatenessStats()
    for ms in [0.05] * 98 + [5.0, 50.0]:
        stats.record(ms)
    snap = stats.snapshot()["lateness_ms"]
    assert snap["p50"] == pytest.approx(0.1)
    assert snap["p99"] == pytest.approx(5.1)
    assert snap["max"] == 50.0

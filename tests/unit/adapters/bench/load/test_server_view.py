"""The server's ``/metrics`` read with ``prometheus_client``'s parser, its histograms turned into
latencies as Prometheus' ``histogram_quantile`` does, and the side-by-side view with the client."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.adapters.bench.load import client, metrics, server_view
from gpuplan.adapters.bench.load.http1 import Exchange
from gpuplan.adapters.store.records import RequestRecord

TTFT = "vllm:time_to_first_token_seconds"
EXPOSITION = f"""# HELP {TTFT} Histogram of time to first token in seconds.
# TYPE {TTFT} histogram
{TTFT}_bucket{{le="0.01",model_name="m"}} 2.0
{TTFT}_bucket{{le="0.1",model_name="m"}} 6.0
{TTFT}_bucket{{le="1.0",model_name="m"}} 10.0
{TTFT}_bucket{{le="+Inf",model_name="m"}} 10.0
{TTFT}_count{{model_name="m"}} 10.0
{TTFT}_sum{{model_name="m"}} 1.5
{TTFT}_created{{model_name="m"}} 1.7e9
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{model_name="m"}} 480.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 3.0
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 9.0
"""


def test_buckets_are_kept_and_created_timestamps_and_other_prefixes_dropped() -> None:
    samples = metrics.parse(EXPOSITION)
    assert samples[f'{TTFT}_bucket{{le="+Inf",model_name="m"}}'] == 10.0
    assert samples['vllm:prompt_tokens_total{model_name="m"}'] == 480.0
    assert not any("_created" in k or k.startswith("process_") for k in samples)
    # a key reads back, escaped label values included, by the same parser (server_view._by_name)
    assert server_view._by_name({f'{TTFT}_bucket{{le="0.1",model_name="a\\"b"}}': 0.0}) == {
        f"{TTFT}_bucket": [({"le": "0.1", "model_name": 'a"b'}, 0.0)]
    }


def test_unparseable_text_is_a_recorded_error_not_a_crash() -> None:
    assert "unparseable" in metrics.parsed({"text": 'vllm:x{le="1" 3\n'})["error"]
    assert metrics.parsed({"error": "ConnectError: refused"}) == {"error": "ConnectError: refused"}


def test_a_counter_series_first_exposed_during_the_run_counts_from_zero() -> None:
    """vLLM-like servers create a label set on first use: absent before = 0 for counters and buckets,
    while a gauge needs both ends."""
    before = {"samples": {"vllm:num_requests_running": 0.0}}
    after = {
        "samples": {"vllm:num_requests_running": 2.0, 'vllm:prompt_tokens_total{m="x"}': 5.0, "vllm:g": 1.0}
    }
    assert metrics.compare(before, after)["delta"] == {
        "vllm:num_requests_running": 2.0,
        'vllm:prompt_tokens_total{m="x"}': 5.0,
    }
    assert metrics.compare({"error": "x"}, after)["delta"] == {}


def test_quantile_interpolates_inside_the_bucket_as_histogram_quantile() -> None:
    """Cumulative 2/6/10 at 0.01/0.1/1 s: rank 5 (p50) is 3/4 of the way through (0.01, 0.1]; rank 9.9
    (p99) is 3.9/4 through (0.1, 1]; a rank in +Inf reads as the highest finite bound."""
    buckets = [(0.01, 2.0), (0.1, 6.0), (1.0, 10.0), (float("inf"), 10.0)]
    assert server_view.quantile(0.5, buckets) == pytest.approx((0.01 + 0.09 * 0.75, 0.01, 0.1))
    assert server_view.quantile(0.99, buckets) == pytest.approx((0.1 + 0.9 * 3.9 / 4, 0.1, 1.0))
    assert server_view.quantile(0.1, buckets) == pytest.approx((0.005, 0.0, 0.01))  # first bucket from 0
    overflow = [(0.01, 1.0), (float("inf"), 4.0)]
    assert server_view.quantile(0.9, overflow) == (0.01, 0.01, float("inf"))
    assert server_view.quantile(0.5, [(0.01, 0.0), (float("inf"), 0.0)]) is None


def test_histogram_in_ms_with_the_exact_mean_and_the_bucket_of_each_percentile() -> None:
    by_name = server_view._by_name(metrics.parse(EXPOSITION))
    h = server_view.histogram_ms(by_name, TTFT)
    assert h is not None
    assert (h["count"], h["mean"]) == (10, pytest.approx(150.0))  # 1.5 s / 10, in ms
    assert h["p50"] == pytest.approx(77.5) and h["bucket_ms"]["p50"] == pytest.approx([10.0, 100.0])
    assert h["source"] == TTFT
    assert server_view.histogram_ms(by_name, "vllm:e2e_request_latency_seconds") is None


def _ok(ttft_ms: float, itl_ms: tuple[float, ...], tokens: tuple[int, int]) -> RequestRecord:
    e2e = ttft_ms + sum(itl_ms)
    return RequestRecord(
        index=0,
        scheduled_s=0.0,
        sent_s=0.0,
        done_s=e2e / 1e3,
        status=200,
        ttft_ms=ttft_ms,
        e2e_ms=e2e,
        itl_ms=itl_ms,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def test_side_by_side_puts_the_servers_numbers_beside_the_clients() -> None:
    before: dict[str, Any] = {"samples": {}}
    after = {"samples": metrics.parse(EXPOSITION)}
    scraped = metrics.compare(before, after)
    during = {"samples": {'vllm:num_requests_running{model_name="m"}': 3.0}}
    scraped["timeline"] = metrics.timeline([(0.0, before), (0.5, during), (1.0, after)])
    records = [_ok(140.0, (10.0, 12.0), (48, 3)), _ok(170.0, (11.0, 9.0), (48, 3))]
    failed = RequestRecord(index=2, scheduled_s=0, sent_s=0, done_s=0, error="http_500", input_tokens=48)
    view = server_view.side_by_side(scraped, [*records, failed])
    assert view is not None
    ttft = view["latency_ms"]["ttft_ms"]
    assert ttft["server"]["mean"] == pytest.approx(150.0) and ttft["client"]["mean"] == pytest.approx(155.0)
    assert view["counters"]["prompt_tokens"] == {
        "server": 480,
        "client": 96,
        "source": "vllm:prompt_tokens_total",
    }
    assert view["load"]["running"] == {
        "mean": 3.0,
        "max": 3.0,
        "scrapes": 1,
        "source": "vllm:num_requests_running",
    }
    assert "itl_ms" not in view["latency_ms"]  # the server exposes no ITL histogram
    assert server_view.side_by_side({"before": {}, "after": {"error": "x"}, "delta": {}}, records) is None


def test_a_stream_ended_without_done_but_with_a_finish_reason_is_complete() -> None:
    """``transformers serve`` ends with the usage event and no ``[DONE]`` (as vllm bench serve accepts);
    a body with neither ``[DONE]`` nor a ``finish_reason`` is still ``incomplete``."""
    finished = b'data: {"choices":[{"text":"","finish_reason":"length"}]}\n\n'
    for tail, error in ((finished, None), (b"", "incomplete")):
        state = client._Stream()
        state.feed(b'data: {"choices":[{"text":" a"}]}\n\n' + tail, 1.0)
        ex = Exchange(state.feed, lambda _e, _x: None)
        ex.status, ex.done_at = 200, 1.1
        record = client._finish(state, ex, None, 0, 0.0, 0.5, 0.0, False, 4)
        assert record.error == error

"""Schedules, SSE parsing, records and the summary of the load tester (no network)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.bench.load import client
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.schedule import offsets_s
from gpuplan.adapters.bench.load.summary import summarise
from gpuplan.adapters.bench.tokens import estimate_tokens, synthetic_prompt
from gpuplan.adapters.store.records import RequestRecord


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "url": "http://127.0.0.1:1",
        "model": "m",
        "rate_rps": 100.0,
        "duration_s": 10.0,
        "input_tokens": 16,
        "output_tokens": 8,
    }
    return LoadConfig.model_validate(base | kw)


@pytest.mark.parametrize("arrival", ["poisson", "constant", "gamma"])
def test_schedule_has_exact_count_inside_window(arrival: str) -> None:
    offsets = offsets_s(_config(arrival=arrival, burstiness=0.5, warmup_s=2.0))
    assert len(offsets) == 1200
    assert offsets == sorted(offsets)
    assert offsets[0] >= 0.0 and offsets[-1] < 12.0


def test_constant_schedule_is_evenly_spaced_and_seeded_poisson_repeats() -> None:
    assert offsets_s(_config(arrival="constant"))[:3] == pytest.approx([0.0, 0.01, 0.02])
    assert offsets_s(_config(seed=3)) == offsets_s(_config(seed=3))
    assert offsets_s(_config(seed=3)) != offsets_s(_config(seed=4))


def test_config_needs_exactly_one_load_profile() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        _config(concurrency=4)
    with pytest.raises(ValueError, match="exactly one"):
        _config(trace_path="t.csv")
    with pytest.raises(ValueError, match="http"):
        _config(url="localhost:8000")


def test_synthetic_prompt_has_the_asked_token_count_and_differs_per_seed() -> None:
    assert estimate_tokens(synthetic_prompt(300, 1)) == 300
    assert synthetic_prompt(50, 1) != synthetic_prompt(50, 2)


def test_sse_events_count_tokens_usage_and_done() -> None:
    state = client._Stream()
    state.feed(b'data: {"choices":[{"text":" a"}]}\n\n', 1.0)
    state.feed(b'data: {"choices":[{"delta":{"content":"b"}}]}\r\n\r\ndata: {"choices":[{"del', 1.5)
    state.feed(b'ta":{"role":"assistant","content":""}}]}\n\n', 1.6)
    state.feed(
        b'data: {"choices":[{"text":"","finish_reason":"length"}],\ndata: "usage":{"prompt_tokens":7,'
        b'"completion_tokens":2}}\n\n',
        1.7,
    )
    state.feed(b": keep-alive comment\n\nevent: x\n\n", 1.8)
    state.feed(b"data: [DONE]", 1.9)
    state.close(2.0)
    assert state.token_times == [1.0, 1.5]
    assert (state.prompt_tokens, state.completion_tokens, state.done) == (7, 2, True)
    assert state.finish_reason == "length"
    for bad in (b'data: {"choices": [\n\n', b"data: [1, 2]\n\n", b'data: {"a": 1} x\n\n'):
        with pytest.raises(client.MalformedSSE):
            client._Stream().feed(bad, 2.0)


def test_record_timings_follow_docs_metrics() -> None:
    state = client._Stream(token_times=[10.05, 10.06, 10.08], done=True)
    rec = client._record(
        state,
        0,
        scheduled=10.0,
        sent=10.002,
        done=10.08,
        origin=10.0,
        warmup=False,
        status=200,
        error=None,
        detail=None,
        input_tokens=16,
    )
    assert rec.ttft_ms == pytest.approx(48.0)
    assert rec.ttft_sched_ms == pytest.approx(50.0)
    assert rec.itl_ms == pytest.approx((10.0, 20.0))
    assert rec.tpot_ms == pytest.approx((rec.e2e_ms - rec.ttft_ms) / 2)  # type: ignore[operator]
    assert rec.send_lag_ms == pytest.approx(2.0)


def _rec(i: int, error: str | None = None, warmup: bool = False) -> RequestRecord:
    ok = error is None
    return RequestRecord(
        index=i,
        scheduled_s=i * 0.01,
        sent_s=i * 0.01,
        done_s=i * 0.01 + 0.1,
        warmup=warmup,
        error=error,
        ttft_ms=50.0 if ok else None,
        ttft_sched_ms=50.0 if ok else None,
        e2e_ms=100.0 if ok else None,
        e2e_sched_ms=100.0 if ok else None,
        tpot_ms=10.0 if ok else None,
        itl_ms=(10.0,) * 5 if ok else (),
        output_tokens=6 if ok else 0,
    )


def test_summary_counts_errors_excludes_warmup_and_computes_goodput() -> None:
    cfg = _config(duration_s=1.0, slo_ttft_ms=60.0)
    records = (
        [_rec(i) for i in range(90)]
        + [_rec(90 + i, "http_500") for i in range(10)]
        + [_rec(100, warmup=True)]
    )
    s = summarise("r", cfg, records, [0.1, 0.2])
    assert (s.requests_sent, s.requests_completed, s.requests_failed, s.warmup_excluded) == (100, 90, 10, 1)
    assert s.errors == {"http_500": 10}
    assert s.ttft_ms.p50 == pytest.approx(50.0)
    assert s.itl_ms.mean == pytest.approx(10.0)
    assert s.achieved_rate_rps == pytest.approx(100.0)
    assert s.goodput_rps == pytest.approx(90.0)


def test_latest_record_of_an_index_wins() -> None:
    s = summarise(
        "r", _config(duration_s=1.0), [_rec(0, "timeout"), _rec(0).model_copy(update={"done_s": 5.0})]
    )
    assert (s.requests_completed, s.requests_failed) == (1, 0)


def test_classify_maps_exceptions_to_kinds() -> None:
    from gpuplan.adapters.bench.load import wire

    assert client.classify(TimeoutError()) == "timeout"
    assert client.classify(wire.RequestTimeout("x")) == "timeout"
    assert client.classify(wire.ConnectFailed("x")) == "connect"
    assert client.classify(wire.Dropped("x")) == "dropped"
    assert client.classify(ConnectionResetError()) == "dropped"
    assert client.classify(client.MalformedSSE("x")) == "malformed_sse"
    assert client.classify(ValueError()) == "other"


def test_token_events_are_scanned_like_they_would_be_decoded() -> None:
    state = client._Stream()
    events = [
        b'{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],'
        b'"usage":null}',
        b'{"id":"x","choices":[{"index":0,"delta":{"content":"Hi \\"text\\": \\"no\\""},"finish_reason":null}]}',
        b'{"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]}',
        b'{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}',
        b'{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}',
    ]
    for i, event in enumerate(events):
        client._event(state, event, float(i))
    assert state.token_times == [1.0, 2.0]
    assert (state.finish_reason, state.prompt_tokens, state.completion_tokens) == ("stop", 4, 2)

"""The summary's warnings: the client's own event-loop lag over ``LOOP_LAG_WARN_MS`` at P99, and early
stops (a ``finish_reason`` other than ``length``) counted, with the cause named by ``ignore_eos``."""

from __future__ import annotations

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import LOOP_LAG_WARN_MS, summarise
from gpuplan.adapters.store.records import RequestRecord


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {"url": "http://127.0.0.1:1", "model": "m", "rate_rps": 10.0, "duration_s": 1.0}
    return LoadConfig.model_validate(base | {"input_tokens": 4, "output_tokens": 8} | kw)


def _record(index: int, finish: str | None) -> RequestRecord:
    return RequestRecord(
        index=index, scheduled_s=index / 10, sent_s=index / 10, done_s=index / 10 + 0.05, ttft_ms=10.0,
        e2e_ms=50.0, output_tokens=8, finish_reason=finish,
    )  # fmt: skip


def test_loop_lag_over_the_limit_at_p99_is_warned_of_and_under_it_is_not() -> None:
    records = [_record(i, "length") for i in range(10)]
    calm = [1.0] * 1000
    stalled = [1.0] * 980 + [3 * LOOP_LAG_WARN_MS] * 20  # 2 % of samples: the P99 is a stall
    assert summarise("r", _config(), records, calm).warnings == []
    [warning] = summarise("r", _config(), records, stalled).warnings
    assert warning.startswith(f"the client's event loop lagged: P99 {3 * LOOP_LAG_WARN_MS:.1f} ms > 20 ms")
    assert summarise("r", _config(), records, stalled).client.loop_lag_ms.p99 == 3 * LOOP_LAG_WARN_MS


def test_early_stops_are_counted_by_reason_and_their_cause_named() -> None:
    records = [_record(0, "stop"), _record(1, "stop"), _record(2, "length"), _record(3, None)]
    off = summarise("r", _config(ignore_eos=False), records)
    assert off.finish_reasons == {"stop": 2, "length": 1, "none": 1} and off.stopped_early == 2
    assert off.warnings == [
        "2 requests stopped before max tokens (finish_reason=stop): ignore_eos was off, so outputs are "
        "shorter than --output-tokens; pass --ignore-eos for fixed lengths"
    ]
    on = summarise("r", _config(ignore_eos=True), records)
    assert on.warnings[0].endswith("ignore_eos was sent: the server did not honour it")

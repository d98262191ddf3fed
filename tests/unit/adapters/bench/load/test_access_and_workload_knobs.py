"""Auth, headers, request body, Retry-After, backoff, --max-errors and vLLM's workload knobs (no network)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuplan.adapters.bench.load import client, flags, wire
from gpuplan.adapters.bench.load.brakes import (
    BACKOFF_MAX_S,
    MIN_FINISHED_FOR_SHARE,
    Brakes,
    limit_text,
    pause_s,
)
from gpuplan.adapters.bench.load.config import REVEAL_SECRETS, LoadConfig
from gpuplan.adapters.bench.load.http1 import MAX_RETRY_AFTER_S, retry_after_s
from gpuplan.adapters.bench.load.schedule import offsets_s
from gpuplan.adapters.bench.load.summary import summarise
from gpuplan.adapters.bench.load.workload import build, drawn_lengths, load_sharegpt
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.redact import MASK

KEY = "sk-test-Secret-42"


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "url": "http://127.0.0.1:1",
        "model": "m",
        "concurrency": 1,
        "duration_s": 10.0,
        "input_tokens": 16,
        "output_tokens": 8,
    }
    return LoadConfig.model_validate(base | kw)


def _body(config: LoadConfig) -> dict[str, object]:
    result: dict[str, object] = json.loads(client.request_body(config, "hi there", None))
    return result


def test_request_body_defaults_keep_todays_sampling() -> None:
    body = _body(_config())
    assert body["ignore_eos"] is True and body["temperature"] == 0.0
    assert "top_p" not in body and "top_k" not in body  # the server's defaults unless given
    assert body["max_tokens"] == 8 and body["prompt"] == "hi there" and body["stream"] is True


def test_sampling_flags_and_extra_body_reach_the_body_extra_body_last() -> None:
    config = _config(
        temperature=0.7, top_p=0.9, top_k=40, ignore_eos=False, extra_body={"seed": 3, "max_tokens": 2}
    )
    body = _body(config)
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.9, 40)
    assert "ignore_eos" not in body  # off: left out (a strict server refuses an unknown field), as vLLM's
    assert body["seed"] == 3 and body["max_tokens"] == 2  # merged over what gpuplan sets


def test_the_key_and_headers_are_on_the_wire() -> None:
    config = _config(api_key=KEY, headers={"X-Source": "bench"})
    raw = wire.Pool(config.url, config.http_headers()).request_bytes("/v1/completions", b"{}")
    head = raw.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    assert f"Authorization: Bearer {KEY}" in head and "X-Source: bench" in head
    assert head[-1] == "Content-Length: 2"  # the extra headers sit inside the head, framing intact


def test_a_header_given_wins_over_the_key() -> None:
    config = _config(api_key=KEY, headers={"Authorization": "Basic abc"})
    assert config.http_headers() == {"Authorization": "Basic abc"}


def test_the_key_is_never_dumped_and_secret_headers_are_masked() -> None:
    config = _config(api_key=KEY, headers={"X-API-Key": "hdr-secret", "X-Source": "bench"})
    for dumped in (config.model_dump_json(), json.dumps(config.model_dump(mode="json")), repr(config)):
        assert KEY not in dumped and "hdr-secret" not in dumped, dumped
    assert config.model_dump()["api_key"] is None
    assert config.model_dump()["headers"] == {"X-API-Key": MASK, "X-Source": "bench"}
    # Only the hand-over to a worker process reveals them, and it round-trips.
    revealed = LoadConfig.model_validate_json(config.model_dump_json(context={REVEAL_SECRETS: True}))
    assert revealed.api_key == KEY and revealed.headers["X-API-Key"] == "hdr-secret"
    assert set(config.secrets()) == {f"Bearer {KEY}", "hdr-secret", KEY}


def test_resuming_takes_the_secrets_again_and_refuses_a_masked_header() -> None:
    stored = LoadConfig.from_stored(_config(api_key=KEY, headers={"X-API-Key": "s"}).model_dump(mode="json"))
    assert stored.api_key is None and stored.headers == {"X-API-Key": MASK}
    with pytest.raises(UserInputError, match="secret header X-API-Key") as caught:
        stored.resumed_with(api_key=KEY, headers={})
    assert "--header 'X-API-Key: VALUE'" in caught.value.one_line()
    resumed = stored.resumed_with(api_key=KEY, headers={"X-API-Key": "s"})
    assert resumed.api_key == KEY and resumed.http_headers()["X-API-Key"] == "s"


@pytest.mark.parametrize(
    ("headers", "key", "expected"),
    [
        ({"Bad Name": "value-1"}, None, "not a valid HTTP header name"),
        ({"X-A": "value-2\r\nX-Injected: 1"}, None, "control or non-Latin-1 character"),
        ({"X-A": "value-\u20ac"}, None, "control or non-Latin-1 character"),
        ({}, "key-1\nx", "--api-key"),
        ({}, "", "--api-key"),
    ],
)
def test_headers_and_keys_unfit_for_the_wire_are_refused_without_echoing_them(
    headers: dict[str, str], key: str | None, expected: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        _config(headers=headers, api_key=key)
    message = str(caught.value.errors()[0]["msg"])
    assert expected in message
    assert all(v not in message for v in headers.values()) and (not key or key not in message)


def test_flag_parsers() -> None:
    assert flags.headers(["X-A: 1", "X-B:two:three", "X-A: 3"]) == {"X-A": "3", "X-B": "two:three"}
    assert flags.headers(["x-info=0.3.3", "Authorization: Bearer ab=="]) == {
        "x-info": "0.3.3",  # vllm bench serve's form
        "Authorization": "Bearer ab==",
    }
    with pytest.raises(UserInputError, match="--header number 2") as caught:
        flags.headers(["X-A: 1", "Authorization Bearer sk-xyz"])
    assert "sk-xyz" not in caught.value.one_line()
    assert flags.extra_body('{"seed": 1}') == {"seed": 1} and flags.extra_body(None) == {}
    for bad in ("[1]", "{nope"):
        with pytest.raises(UserInputError, match="--extra-body"):
            flags.extra_body(bad)
    assert flags.max_errors("50") == (50, None) and flags.max_errors("5%") == (None, 0.05)
    for bad in ("0", "-3", "0%", "150%", "x", "nan%"):
        with pytest.raises(UserInputError, match="--max-errors"):
            flags.max_errors(bad)
    assert flags.request_rate(None, "inf") == (None, True) and flags.request_rate(None, "2.5") == (2.5, False)
    assert flags.request_rate(4.0, None) == (4.0, False)
    for rate, text in ((None, "0"), (None, "fast"), (3.0, "3")):
        with pytest.raises(UserInputError, match="--request-rate"):
            flags.request_rate(rate, text)


def _head(status: int, *lines: str) -> bytes:
    return "\r\n".join([f"HTTP/1.1 {status} X", *lines]).encode()


def test_retry_after_seconds_and_dates_on_429_and_503_only() -> None:
    assert retry_after_s(_head(429, "Retry-After: 3"), 429) == 3.0
    assert retry_after_s(_head(503, "retry-after:  7 "), 503) == 7.0
    assert retry_after_s(_head(500, "Retry-After: 3"), 500) is None
    assert retry_after_s(_head(429), 429) is None
    assert retry_after_s(_head(429, "Retry-After: soon"), 429) is None
    assert retry_after_s(_head(429, "Retry-After: 99999"), 429) == MAX_RETRY_AFTER_S
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 28.0 <= (retry_after_s(_head(429, f"Retry-After: {when}"), 429) or 0.0) <= 30.0


def test_backoff_doubles_to_its_cap_and_retry_after_wins_when_longer() -> None:
    waits = [pause_s(consecutive_failures=n, retry_after_s=None) for n in range(9)]
    assert waits[:4] == [0.0, 0.05, 0.1, 0.2] and waits[-1] == BACKOFF_MAX_S
    assert pause_s(consecutive_failures=1, retry_after_s=2.0) == 2.0
    assert pause_s(consecutive_failures=8, retry_after_s=1.0) == BACKOFF_MAX_S
    assert pause_s(consecutive_failures=0, retry_after_s=None) == 0.0


def _record(index: int, error: str | None) -> RequestRecord:
    return RequestRecord(index=index, scheduled_s=0.0, sent_s=0.0, done_s=0.1, error=error)


def test_brakes_stop_at_a_count_split_over_workers_and_at_a_share() -> None:
    brakes = Brakes(_config(max_errors=5))
    for i in range(4):
        brakes.note(_record(i, "http_500"))
    assert not brakes.stopped
    brakes.note(_record(4, "http_500"))
    assert brakes.stopped
    assert Brakes(_config(max_errors=5), parts=2).max_errors == 3  # each worker: its part, rounded up
    share = Brakes(_config(max_error_share=0.1))
    share.note(_record(0, "timeout"))
    assert not share.stopped  # one early failure is not 100 %
    for i in range(1, MIN_FINISHED_FOR_SHARE):
        share.note(_record(i, None))
    assert share.finished == MIN_FINISHED_FOR_SHARE and not share.stopped  # 1/20 = 5 % < 10 %
    share.note(_record(98, "timeout"))
    assert not share.stopped  # 2 of 21 = 9.5 %
    share.note(_record(99, "timeout"))
    assert share.stopped  # 3 of 22 = 13.6 %
    assert limit_text(_config(max_errors=5)) == "5" and limit_text(_config(max_error_share=0.05)) == "5%"


def test_num_prompts_bounds_the_schedule_and_inf_sends_all_at_zero() -> None:
    rated = _config(concurrency=None, rate_rps=20.0, num_prompts=50, duration_s=86_400.0)
    offsets = offsets_s(rated)
    assert len(offsets) == 50 and offsets[-1] < 50 / 20.0  # N requests on a window of N / rate
    assert offsets_s(rated.model_copy(update={"duration_s": 1.0})) == offsets_s(
        rated.model_copy(update={"duration_s": 1.0, "num_prompts": None})
    )  # a shorter --duration cuts it: 20 requests
    burst = _config(concurrency=None, all_at_once=True, num_prompts=7, max_concurrency=2, duration_s=86_400.0)
    assert offsets_s(burst) == [0.0] * 7 and burst.mode == "burst" and build(burst).offsets == [0.0] * 7


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"concurrency": None, "all_at_once": True}, "--request-rate inf needs --num-prompts"),
        ({"concurrency": None, "all_at_once": True, "num_prompts": 3, "warmup_s": 1.0}, "--warmup"),
        ({"max_concurrency": 4}, "--max-concurrency caps an open loop"),
        ({"dataset": "sharegpt"}, "--dataset-path"),
        ({"dataset_path": "x.json"}, "--dataset-path"),
        ({"range_ratio": 0.5, "prompts_path": "p.jsonl"}, "--random-range-ratio"),
        ({"range_ratio": 1.0}, "less than 1"),
    ],
)
def test_knob_combinations_that_mean_nothing_are_refused(kw: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError, match=expected):
        _config(**kw)


def test_range_ratio_draws_whole_lengths_uniformly_in_vllms_interval() -> None:
    config = _config(input_tokens=100, output_tokens=10, range_ratio=0.5, seed=3)
    drawn = [drawn_lengths(config, i) for i in range(4000)]
    inputs, outputs = [d[0] for d in drawn], [d[1] for d in drawn]
    assert (min(inputs), max(inputs)) == (50, 150) and (min(outputs), max(outputs)) == (5, 15)
    assert abs(sum(inputs) / len(inputs) - 100.0) < 1.5  # uniform: the mean is the midpoint
    assert len(set(outputs)) == 11  # every whole number of [5, 15]
    assert drawn_lengths(config, 7) == drawn_lengths(config, 7)  # seeded per request
    prompt, n_in, n_out = build(config).request(config, 7)
    assert (len(prompt.split()), n_in, n_out) == (drawn_lengths(config, 7)[0], *drawn_lengths(config, 7))
    one = _config(input_tokens=1, output_tokens=1, range_ratio=0.9)
    assert {drawn_lengths(one, i) for i in range(200)} <= {(1, 1), (1, 2), (2, 1), (2, 2)}  # floor >= 1


def turn(who: str, text: str) -> dict[str, str]:
    """One ShareGPT turn."""
    return {"from": who, "value": text}


def _sharegpt(path: Path, entries: object) -> str:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return str(path)


def test_sharegpt_prompts_keep_their_real_lengths(tmp_path: Path) -> None:
    path = _sharegpt(
        tmp_path / "s.json",
        [
            {"id": "a", "conversations": [turn("human", "one two three"), turn("gpt", "a b c d e")]},
            {"id": "b", "conversations": [turn("human", "only a question")]},  # no answer: skipped
            {"id": "c", "conversations": [turn("human", "x y"), turn("gpt", "z"), turn("human", "more")]},
            {"id": "d", "conversations": [turn("human", " "), turn("gpt", "empty prompt")]},  # skipped
        ],
    )
    prompts = load_sharegpt(path, seed=0)
    assert sorted((p.text, p.output_tokens) for p in prompts) == [("one two three", 5), ("x y", 1)]
    config = _config(dataset="sharegpt", dataset_path=path)
    plan = build(config)
    seen = {plan.request(config, i) for i in range(4)}
    assert seen == {("one two three", 3, 5), ("x y", 2, 1)}


@pytest.mark.parametrize("content", ["{not json", '{"conversations": []}', "[]", '[{"conversations": 3}]'])
def test_a_bad_sharegpt_file_is_one_file_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FileFormatError, match=str(path)):
        load_sharegpt(str(path), seed=0)


def test_a_count_bounded_summary_uses_the_span_not_the_nominal_duration() -> None:
    config = _config(num_prompts=4, duration_s=86_400.0)
    records = [
        RequestRecord(
            index=i, scheduled_s=0.0, sent_s=0.5 * i, done_s=0.5 * i + 0.5, ttft_ms=1.0, e2e_ms=500.0
        )
        for i in range(4)
    ]
    summary = summarise("r", config, records)
    assert summary.achieved_rate_rps == pytest.approx(4 / 2.0)  # 4 completed by 2.0 s, not 4 / 86,400
    assert math.isclose(summary.requests_completed, 4)


def test_an_error_body_echoing_a_secret_is_stored_masked() -> None:
    config = _config(api_key=KEY, headers={"X-Api-Token": "tok-99"})
    echoed = RequestRecord(
        index=0, scheduled_s=0.0, sent_s=0.0, done_s=0.1, status=401, error="http_401",
        error_detail=f"bad header Authorization: Bearer {KEY}; token tok-99",
    )  # fmt: skip
    masked = client._masked(echoed, config)
    assert masked.error_detail == f"bad header Authorization: {MASK}; token {MASK}"
    bare = echoed.model_copy(update={"error_detail": f"key {KEY} unknown"})
    assert client._masked(bare, config).error_detail == f"key {MASK} unknown"  # the key alone too
    assert client._masked(_record(1, None), config) == _record(1, None)  # no detail: untouched


def test_a_bearer_header_masks_its_bare_token_too() -> None:
    """Review M3: a server echoing the token of ``--header 'Authorization: Bearer T'`` leaked T."""
    config = _config(headers={"Authorization": "Bearer sk-abc123456"})
    assert "sk-abc123456" in config.secrets() and "Bearer sk-abc123456" in config.secrets()

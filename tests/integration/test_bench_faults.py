"""The load tester against a faulty OpenAI-compatible server on loopback, in both loops.

The server (:class:`FaultyServer`, in-process, 127.0.0.1 only) answers ``GET /v1/models`` (the
preflight) and each ``POST`` by its mode: 8 token events then one fault of the response's tail
(``TAILS``: ``usage`` counts that are strings, floats, negative, absurdly large or fewer than the
events, malformed last events), or a fault of the exchange itself (``FAULTS``: refused connections, no
answer, 5xx, 429 with ``Retry-After``, a drop before the head or mid-stream, a bad JSON event
mid-stream, a slow drip, a huge or endless event). Every run must end ``completed`` with every request
stored and classed (as many records as the server saw requests, or the schedule holds), and a summary
that counts no token the client did not see arrive.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path

import pytest

from gpuplan.adapters.bench.load import client
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import BenchmarkError
from gpuplan.usecases.bench_serve import serve

TOKEN_EVENTS = 8
"""Token events the server streams per request (the request asks for as many)."""
REQUESTS = 12
"""Requests per run: the closed loop's ``max_requests``, the open loop's schedule (constant arrivals)."""
_TOKEN = b'data: {"choices":[{"index":0,"text":"t","finish_reason":null}]}\n\n'
_DONE = b"data: [DONE]\n\n"


def _usage(completion_tokens: object) -> bytes:
    usage = {"prompt_tokens": 16, "completion_tokens": completion_tokens}
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


TAILS: dict[str, bytes] = {
    "ok": _usage(TOKEN_EVENTS) + _DONE,
    "usage_three_per_event": _usage(3 * TOKEN_EVENTS) + _DONE,
    "usage_string": _usage(str(TOKEN_EVENTS)) + _DONE,
    "usage_float": _usage(8.5) + _DONE,
    "usage_bool": _usage(True) + _DONE,
    "usage_negative": _usage(-28) + _DONE,
    "usage_huge": _usage(10**12) + _DONE,
    "usage_fewer_than_events": _usage(TOKEN_EVENTS - 3) + _DONE,
    "last_event_truncated": b'data: {"choices":[],"usage":{"completion_tokens":',
    "last_event_choices_object": b'data: {"choices":{"first":{"text":"t"}},"usage":{}}',
    "last_event_after_done": _DONE + b'data: {"choices":[{"text":',
}
"""What follows the token events, per fault mode (the last three end the body without a blank line)."""


_HEAD_200 = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
HUGE_EVENT_BYTES = 4 * 1024 * 1024
"""One token event's text of 4 MiB: four times the client's cap, far over any real event."""
SHORT_TIMEOUT_S = 0.5
"""The request timeout of the modes that never finish."""


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class FaultyServer:
    """Serves ``GET /v1/models`` (the preflight) and answers ``POST``s by ``mode``: a ``TAILS`` mode
    streams chunked SSE (the token events, the mode's tail, the terminating chunk); a ``FAULTS`` mode
    answers by its ``_fault_*`` method. Keep-alive; counts the POSTs it read; runs its own loop on a
    thread."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.tail = TAILS.get(mode, b"")
        self.posts = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> FaultyServer:
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop
        ).result(10)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _shutdown(self) -> None:
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length:\s*(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
                if head.startswith(b"GET"):
                    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 21\r\n\r\n{"data":[{"id":"m"}]}')
                    await writer.drain()
                    if self.mode == "refused":  # the preflight passed; then nothing listens any more
                        self.server.close()
                    continue
                self.posts += 1
                fault = getattr(self, f"_fault_{self.mode}", None)
                if fault is None:
                    await self._stream(writer, [_TOKEN] * TOKEN_EVENTS + [self.tail])
                elif await fault(writer) == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # shut down
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, events: list[bytes], head: bool = True) -> None:
        if head:
            writer.write(_HEAD_200)
        for event in events:
            writer.write(_chunk(event))
            await writer.drain()
            await asyncio.sleep(0.001)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _fault_no_answer(self, _writer: asyncio.StreamWriter) -> str:
        await asyncio.sleep(3600)
        return "close"

    async def _error(self, writer: asyncio.StreamWriter, status: bytes, extra: bytes = b"") -> None:
        body = b'{"error":{"message":"overloaded"}}'
        writer.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body))
        await writer.drain()

    async def _fault_http_500(self, writer: asyncio.StreamWriter) -> None:
        await self._error(writer, b"500 Internal Server Error")

    async def _fault_http_503(self, writer: asyncio.StreamWriter) -> None:
        await self._error(writer, b"503 Service Unavailable")

    async def _fault_http_429(self, writer: asyncio.StreamWriter) -> None:
        await self._error(writer, b"429 Too Many Requests", b"Retry-After: 1\r\n")

    async def _fault_drop_before_head(self, writer: asyncio.StreamWriter) -> str:
        writer.transport.abort()
        return "close"

    async def _fault_drop_mid_stream(self, writer: asyncio.StreamWriter) -> str:
        writer.write(_HEAD_200 + _chunk(_TOKEN) * 3)
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.transport.abort()
        return "close"

    async def _fault_bad_json_mid_stream(self, writer: asyncio.StreamWriter) -> None:
        await self._stream(writer, [_TOKEN] * 3 + [b'data: {"choices":[{"text":"t"}]\n\n'] + [_TOKEN] * 5)

    async def _fault_not_json_mid_stream(self, writer: asyncio.StreamWriter) -> None:
        await self._stream(writer, [_TOKEN] * 3 + [b"data: <html>oops</html>\n\n"] + [_TOKEN] * 5)

    async def _fault_slow_drip(self, writer: asyncio.StreamWriter) -> None:
        """The whole answer one byte per chunk (each event cut across many reads): still a success."""
        body = b"".join([_TOKEN] * TOKEN_EVENTS + [TAILS["ok"]])
        writer.write(_HEAD_200)
        for i in range(len(body)):
            writer.write(_chunk(body[i : i + 1]))
            await writer.drain()
            if i % 16 == 0:
                await asyncio.sleep(0.0005)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _fault_drip_past_timeout(self, writer: asyncio.StreamWriter) -> str:
        """A token event every 0.2 s, for ever: the request timeout ends it."""
        writer.write(_HEAD_200)
        while True:
            writer.write(_chunk(_TOKEN))
            await writer.drain()
            await asyncio.sleep(0.2)

    async def _fault_huge_event(self, writer: asyncio.StreamWriter) -> None:
        text = b"x" * HUGE_EVENT_BYTES
        huge = b'data: {"choices":[{"index":0,"text":"' + text + b'","finish_reason":null}]}\n\n'
        writer.write(_HEAD_200)
        for start in range(0, len(huge), 1 << 16):
            writer.write(_chunk(huge[start : start + (1 << 16)]))
            await writer.drain()
        await self._stream(writer, [_TOKEN] * TOKEN_EVENTS + [TAILS["ok"]], head=False)

    async def _fault_endless_event(self, writer: asyncio.StreamWriter) -> str:
        """One ``data:`` line that never ends, as fast as the client reads."""
        writer.write(_HEAD_200 + _chunk(b'data: {"choices":[{"text":"'))
        while True:
            writer.write(_chunk(b"x" * (1 << 16)))
            await writer.drain()


@pytest.fixture(params=["closed", "open"])
def loop_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _run(
    mode: str, loop_kind: str, tmp_path: Path, posts: list[int] | None = None, **changes: object
) -> tuple[BenchSummary | None, Store]:
    """One run against ``mode`` (``changes`` to the config); the summary (None when every request
    failed: ``serve`` then raises, after storing the run) and the store; ``posts`` gets the number of
    requests the server read."""
    store = Store(f"sqlite:///{tmp_path / 'faults.sqlite'}")
    load: dict[str, object] = (
        {"concurrency": 2, "max_requests": REQUESTS, "duration_s": 30.0}
        if loop_kind == "closed"
        else {"rate_rps": REQUESTS / 0.6, "arrival": "constant", "duration_s": 0.6}
    )
    with FaultyServer(mode) as server:
        config = LoadConfig.model_validate(
            {"url": server.url, "model": "m", "input_tokens": 16, "output_tokens": TOKEN_EVENTS}
            | {"request_timeout_s": 5.0}
            | load
            | changes
        )
        try:
            return serve(config, store.url), store
        except BenchmarkError as exc:
            assert "every request failed" in str(exc), exc
            return None, store
        finally:
            if posts is not None:
                posts.append(server.posts)


FAILING = {
    "usage_string": "usage_invalid",
    "usage_float": "usage_invalid",
    "usage_bool": "usage_invalid",
    "usage_negative": "usage_invalid",
    "usage_huge": "usage_mismatch",
    "usage_fewer_than_events": "usage_mismatch",
    "last_event_truncated": "malformed_sse",
    "last_event_choices_object": "malformed_sse",
    "last_event_after_done": "malformed_sse",
}


@pytest.mark.parametrize("mode", sorted(FAILING))
def test_every_faulty_response_is_stored_classed_and_the_run_finished(
    mode: str, loop_kind: str, tmp_path: Path
) -> None:
    summary, store = _run(mode, loop_kind, tmp_path)
    [run] = store.runs()
    records = store.records(run.run_id)
    assert run.status == "completed" and run.summary is not None
    assert len(records) == REQUESTS, len(records)
    assert {r.error for r in records} == {FAILING[mode]}, {(r.error, r.error_detail) for r in records}
    assert all(r.output_tokens <= TOKEN_EVENTS and not r.usage_reported for r in records)
    assert summary is None  # every request failed
    assert run.summary["output_tokens_per_s"] == 0.0 and run.summary["requests_completed"] == 0
    assert run.summary["errors"] == {FAILING[mode]: REQUESTS}


@pytest.mark.parametrize(("mode", "tokens"), [("ok", TOKEN_EVENTS), ("usage_three_per_event", 24)])
def test_believable_usage_is_recorded(mode: str, tokens: int, loop_kind: str, tmp_path: Path) -> None:
    summary, store = _run(mode, loop_kind, tmp_path)
    assert summary is not None and summary.requests_completed == REQUESTS and not summary.errors
    assert summary.output_tokens_mean == tokens
    [run] = store.runs()
    assert run.status == "completed"
    assert all(r.usage_reported and r.output_tokens == tokens for r in store.records(run.run_id))


def test_a_failure_while_finishing_a_request_still_stores_it(
    loop_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard both loops share: a response no rule foresaw (here: any) is an ``other``, not a crash."""

    def broken(*_args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(client, "_finish", broken)
    summary, store = _run("ok", loop_kind, tmp_path)
    [run] = store.runs()
    records = store.records(run.run_id)
    assert summary is None and run.status == "completed" and len(records) == REQUESTS
    assert {(r.error, r.error_detail, r.output_tokens) for r in records} == {
        ("other", "RuntimeError: a bug", TOKEN_EVENTS)
    }


@pytest.mark.parametrize(
    ("completion_tokens", "events", "believed"),
    [
        (None, 8, True),
        (8, 8, True),
        (128, 8, True),
        (7, 8, False),
        (129, 8, False),
        (0, 0, True),
        (1, 0, False),
    ],
)
def test_usage_tolerance_bounds(completion_tokens: int | None, events: int, believed: bool) -> None:
    assert client.USAGE_TOKENS_PER_EVENT_MAX == 16
    problem = client.usage_problem(completion_tokens=completion_tokens, token_events=events)
    assert (problem is None) == believed, problem


def test_a_failure_outside_the_requests_marks_the_run_failed_and_keeps_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink's third record raises (a bug, a full disk): the others are kept, the run is not live."""
    from gpuplan.adapters.store import database

    put = database.RecordWriter.put
    seen: list[int] = []

    def failing(self: database.RecordWriter, record: RequestRecord) -> None:
        seen.append(record.index)
        if len(seen) == 3:
            raise OSError("disk full")
        put(self, record)

    monkeypatch.setattr(database.RecordWriter, "put", failing)
    with pytest.raises(OSError, match="disk full"):
        _run("ok", "closed", tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'faults.sqlite'}")
    [run] = store.runs()
    stored = {r.index for r in store.records(run.run_id)}
    # All but the record whose write failed (requests still in flight end as dropped, stored too).
    assert run.status == "failed" and stored == set(seen) - {seen[2]}, (stored, seen)


FAULTS: dict[str, tuple[str | None, dict[str, object]]] = {
    "refused": ("connect", {}),
    "no_answer": ("timeout", {"request_timeout_s": SHORT_TIMEOUT_S}),
    "http_500": ("http_500", {}),
    "http_503": ("http_503", {}),
    "http_429": ("http_429", {}),
    "drop_before_head": ("dropped", {}),
    "drop_mid_stream": ("dropped", {}),
    "bad_json_mid_stream": ("malformed_sse", {}),
    "not_json_mid_stream": ("malformed_sse", {}),
    "slow_drip": (None, {}),
    "drip_past_timeout": ("timeout", {"request_timeout_s": SHORT_TIMEOUT_S}),
    "huge_event": ("oversized_event", {}),
    "endless_event": ("oversized_event", {}),
}
"""Per fault of the exchange: the error class every request must get (None: success) and the config
changes it needs (a short timeout where the server never finishes)."""
CLOSED_FEW = {"max_requests": 4, "duration_s": 3.0}
"""The closed loop sends 4 requests per fault mode (backoff and Retry-After would stretch 12)."""


@pytest.mark.parametrize("mode", sorted(FAULTS))
def test_every_fault_of_the_exchange_is_stored_classed_and_the_run_finished(
    mode: str, loop_kind: str, tmp_path: Path
) -> None:
    kind, changes = FAULTS[mode]
    posts: list[int] = []
    few = CLOSED_FEW if loop_kind == "closed" else {}
    started = time.monotonic()
    summary, store = _run(mode, loop_kind, tmp_path, posts, **(few | changes))
    took_s = time.monotonic() - started
    [run] = store.runs()
    records = store.records(run.run_id)
    assert run.status == "completed" and run.summary is not None and not run.live
    # Every request the server read is stored once (none lost, none invented); the open loop sends
    # its whole schedule, the closed loop at most its max_requests (Retry-After: 1 holds it back).
    assert len(records) == len({r.index for r in records})
    expected = REQUESTS if loop_kind == "open" else CLOSED_FEW["max_requests"]
    if loop_kind == "closed" and mode == "http_429":
        assert 2 <= len(records) <= expected  # 2 workers, each held 1 s after every answer
    else:
        assert len(records) == expected
    if mode != "refused":
        assert posts == [len(records)], (posts, len(records))
    assert {r.error for r in records} == {kind}, {(r.error, r.error_detail) for r in records}
    assert all(r.output_tokens <= TOKEN_EVENTS for r in records)
    if kind is None:
        assert summary is not None and summary.requests_completed == len(records)
        assert summary.output_tokens_mean == TOKEN_EVENTS
    else:
        assert summary is None and run.summary["errors"] == {kind: len(records)}
        assert run.summary["output_tokens_per_s"] == 0.0
    assert took_s < 20.0, took_s  # bounded: timeouts, backoff and Retry-After, not a hang


def test_an_event_over_the_cap_fails_the_stream_and_one_at_the_cap_does_not() -> None:
    at_cap = b"data: " + b"x" * (client.MAX_EVENT_BYTES - len(b"data: "))
    stream = client._Stream()
    for start in range(0, len(at_cap), 1 << 16):  # arrives in 64 KiB reads
        stream.feed(at_cap[start : start + (1 << 16)], 0.0)
    with pytest.raises(client.OversizedEvent, match="over 1048576 bytes"):
        stream.feed(b"x", 0.0)  # one byte more, the event still open
    fresh = client._Stream()
    with pytest.raises(client.OversizedEvent):  # an oversized event in one read, complete
        fresh.feed(b"data: " + b"x" * client.MAX_EVENT_BYTES + b"\n\n", 0.0)

"""The load tester against a faulty OpenAI-compatible server on loopback, in both loops.

The server (:class:`FaultyServer`, in-process, 127.0.0.1 only) streams 8 token events per request and
then one fault of the response's tail: ``usage`` counts that are strings, floats, negative, absurdly
large or fewer than the events, and malformed last events. Every run must end ``completed`` with every
request stored and classed, and a summary that counts no token the client did not see arrive.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
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


class FaultyServer:
    """Serves ``GET /v1/models`` (the preflight) and streams ``POST``s as chunked SSE: the token events,
    then the mode's tail, then the terminating chunk. Keep-alive; runs its own loop on a thread."""

    def __init__(self, mode: str) -> None:
        self.tail = TAILS[mode]
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
                    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"data":[]}')
                    continue
                await self._stream(writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # shut down
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for event in [_TOKEN] * TOKEN_EVENTS + [self.tail]:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            await asyncio.sleep(0.001)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


@pytest.fixture(params=["closed", "open"])
def loop_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _run(mode: str, loop_kind: str, tmp_path: Path) -> tuple[BenchSummary | None, Store]:
    """One run against ``mode``; the summary (None when every request failed: ``serve`` then raises,
    after storing the run) and the store."""
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
        )
        try:
            return serve(config, store.url), store
        except BenchmarkError as exc:
            assert "every request failed" in str(exc), exc
            return None, store


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

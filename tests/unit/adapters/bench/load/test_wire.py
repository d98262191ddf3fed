"""The raw HTTP/1.1 client's response parser, fed byte by byte and in odd splits (no network)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.bench.load import client, wire

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENTS = [
    b'data: {"choices":[{"text":" a"}]}\n\n',
    b'data: {"choices":[{"text":" b"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n',
]
STREAM = HEAD + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n"


class _FakePool(wire.Pool):
    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")
        self.released: list[object] = []

    def release(self, conn: object) -> None:
        self.released.append(conn)


class _Outcome:
    def __init__(self) -> None:
        self.calls: list[BaseException | None] = []

    def __call__(self, _ex: wire.Exchange, error: BaseException | None) -> None:
        self.calls.append(error)

    def ok(self) -> bool:
        return self.calls == [None]

    def error(self) -> BaseException | None:
        assert len(self.calls) == 1
        return self.calls[0]


def _exchange(pool: _FakePool) -> tuple[wire._Conn, wire.Exchange, client._Stream, _Outcome]:
    conn = wire._Conn(pool)
    state = client._Stream()
    outcome = _Outcome()
    ex = wire.Exchange(state.feed, outcome)
    conn.exchange, conn.state = ex, wire._HEAD
    return conn, ex, state, outcome


def _feed(pieces: list[bytes]) -> tuple[wire.Exchange, client._Stream, _FakePool, _Outcome]:
    pool = _FakePool()
    conn, ex, state, outcome = _exchange(pool)
    for piece in pieces:
        conn.data_received(piece)
    return ex, state, pool, outcome


@pytest.mark.parametrize("split", [1, 7, 64, len(STREAM)])
def test_chunked_sse_in_any_split_is_parsed_and_the_connection_released(split: int) -> None:
    pieces = [STREAM[i : i + split] for i in range(0, len(STREAM), split)]
    ex, state, pool, outcome = _feed(pieces)
    assert outcome.ok() and ex.status == 200
    assert len(state.token_times) == 2 and state.done and state.completion_tokens == 2
    assert len(pool.released) == 1


def test_whole_chunks_take_the_fast_path() -> None:
    chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS]
    _, state, _, outcome = _feed([HEAD, *chunks[:2], chunks[2] + b"0\r\n\r\n"])
    assert outcome.ok() and state.done and len(state.token_times) == 2


def test_error_status_keeps_the_body_and_connection_close_is_honoured() -> None:
    body = b'{"error": "busy"}'
    raw = b"HTTP/1.1 429 Too Many\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    ex, state, pool, outcome = _feed([raw])
    assert outcome.ok() and ex.status == 429 and ex.error_body == body and not ex.keep_alive
    assert not state.token_times and pool.released == []


def test_malformed_event_fails_the_exchange() -> None:
    bad = b'data: {"choices": [{"text": \n\n'
    _, _, pool, outcome = _feed([HEAD + b"%x\r\n%s\r\n" % (len(bad), bad)])
    assert isinstance(outcome.error(), client.MalformedSSE) and pool.released == []


def test_bad_heads_and_chunk_sizes_are_protocol_violations() -> None:
    with pytest.raises(wire.ProtocolViolation):
        wire.parse_head(b"garbage")
    assert wire.parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 5") == (200, False, 5, True)
    _, _, _, outcome = _feed([HEAD + b"zz\r\n"])
    assert isinstance(outcome.error(), wire.ProtocolViolation)


def test_connection_lost_mid_stream_is_dropped() -> None:
    conn, _, _, outcome = _exchange(_FakePool())
    conn.data_received(HEAD)
    conn.connection_lost(None)
    assert isinstance(outcome.error(), wire.Dropped)


def test_request_bytes_carry_host_and_length() -> None:
    raw = wire.Pool("http://127.0.0.1:8000/base").request_bytes("/base/v1/completions", b"{}")
    assert raw.startswith(b"POST /base/v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    assert raw.endswith(b"Content-Length: 2\r\n\r\n{}")
    with pytest.raises(ValueError):
        wire.Pool("ftp://x")

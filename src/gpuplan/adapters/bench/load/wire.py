"""A raw HTTP/1.1 keep-alive client on asyncio protocols: the load tester's streaming hot path.

Why not httpx: httpx → httpcore → h11 → anyio cost ≈ 100 µs of CPU per SSE chunk (≈ 3 ms per
32-token stream), which capped the load tester at ~25 streams/s. Here each connection is an
``asyncio.Protocol`` whose ``data_received`` decodes the response head, ``Content-Length`` or
chunked bodies in place and hands body bytes with their arrival time to a sink (the SSE parser),
so a token costs one ``recv`` and a few µs of parsing. Connections are kept in a LIFO free list
(O(1) acquire/release); a reused connection that the server closed while idle is retried once on
a new one. One request per connection at a time (no pipelining); ``http://`` and ``https://``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from gpuplan.adapters.bench.load.http1 import (
    BodySink,
    ConnectFailed,
    Dropped,
    Exchange,
    ProtocolViolation,
    RequestTimeout,
    WireError,
    parse_head,
    retry_after_s,
    whole_chunk,
)

__all__ = [
    "ERROR_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "BodySink",
    "ConnectFailed",
    "Dropped",
    "Exchange",
    "OnDone",
    "Pool",
    "ProtocolViolation",
    "RequestTimeout",
    "WireError",
    "clock",
    "parse_head",
]

OnDone = Callable[["Exchange | None", "BaseException | None"], None]
clock = time.monotonic
"""Timestamps of sends and arrivals (the same clock as asyncio's default loop, shared across processes)."""

MAX_HEAD_BYTES = 64 * 1024
ERROR_BODY_BYTES = 2048
_HEAD, _SIZE, _DATA, _TRAILER, _LENGTH, _EOF, _IDLE = range(7)


class _Conn(asyncio.Protocol):
    """One connection; parses the response of the current exchange as bytes arrive."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.state = _IDLE
        self.remaining = 0
        self.exchange: Exchange | None = None
        self.closed = False
        self.reused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        ex = self.exchange
        if ex is not None and self.state == _EOF:
            self._complete(ex, clock())
        elif ex is not None:
            self._fail(Dropped("connection closed by the server" + (f": {exc}" if exc else "")))

    def send(self, ex: Exchange, payload: bytes) -> None:
        assert self.transport is not None
        self.exchange, self.state = ex, _HEAD
        self.buf.clear()
        self.transport.write(payload)

    def expire(self) -> None:
        self._fail(RequestTimeout("no complete response within the request timeout"))

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        ex = self.exchange
        if ex is None:  # bytes nobody asked for: the connection is not trustworthy any more
            self.abort()
            return
        ex.received = True
        now = clock()
        if self.buf:
            data = bytes(self.buf) + data
            self.buf.clear()
        elif self.state == _SIZE and ex.status == 200 and (cut := whole_chunk(data)) > 0:
            try:  # the common case: exactly one chunk, one SSE event, as servers write them
                ex.sink(data[cut:-2], now)
            except Exception as exc:
                self._fail(exc)
            return
        try:
            pos = self._consume(ex, data, now)
        except Exception as exc:  # a protocol violation or the sink's (e.g. malformed SSE)
            self._fail(exc)
            return
        if pos < len(data) and self.exchange is ex:
            if len(data) - pos > MAX_HEAD_BYTES and self.state in (_HEAD, _SIZE, _TRAILER):
                self._fail(ProtocolViolation("response head or chunk line too large"))
                return
            self.buf += data[pos:]

    def _consume(self, ex: Exchange, data: bytes, now: float) -> int:
        """Parse ``data`` from the start; returns where it stopped (the rest needs more bytes)."""
        pos, end = 0, len(data)
        while pos < end and self.exchange is ex:
            state = self.state
            if state == _SIZE and ex.status == 200:
                new = self._chunks(ex.sink, data, pos, now)
            elif state == _SIZE:
                new = self._size(data, pos)
            elif state == _DATA:
                new = self._chunk(ex, data, pos, now)
            elif state in (_LENGTH, _EOF):
                new = self._bytes(ex, data, pos, now)
            else:
                new = self._line(ex, data, pos, now, state)
            if new < 0:
                return pos
            pos = new
        return pos

    def _chunks(self, sink: BodySink, data: bytes, pos: int, now: float) -> int:
        """The hot loop: every whole chunk from ``pos`` to the sink; leaves the state at what is next."""
        end, first = len(data), pos
        while pos < end:
            if data.find(b"\r\n", pos) < 0:
                return -1 if pos == first else pos
            start = self._size(data, pos)
            if self.state != _DATA:
                return start
            stop = start + self.remaining
            if stop + 2 > end:
                return start
            self.state = _SIZE
            sink(data[start:stop], now)
            pos = stop + 2
        return pos

    def _size(self, data: bytes, pos: int) -> int:
        cut = data.find(b"\r\n", pos)
        if cut < 0:
            return -1
        try:
            size = int(data[pos:cut].split(b";", 1)[0], 16)
        except ValueError:
            raise ProtocolViolation(f"bad chunk size {data[pos:cut][:40]!r}") from None
        self.state, self.remaining = (_DATA, size) if size > 0 else (_TRAILER, 0)
        return cut + 2

    def _chunk(self, ex: Exchange, data: bytes, pos: int, now: float) -> int:
        stop = pos + self.remaining
        if stop + 2 > len(data):
            return -1
        self.state = _SIZE
        self._body(ex, data[pos:stop], now)
        return stop + 2

    def _bytes(self, ex: Exchange, data: bytes, pos: int, now: float) -> int:
        stop = len(data) if self.state == _EOF else min(len(data), pos + self.remaining)
        self.remaining -= stop - pos
        self._body(ex, data[pos:stop], now)
        if self.state == _LENGTH and self.remaining == 0:
            self._complete(ex, now)
        return stop

    def _line(self, ex: Exchange, data: bytes, pos: int, now: float, state: int) -> int:
        if state == _HEAD:
            cut = data.find(b"\r\n\r\n", pos)
            if cut < 0:
                return -1
            self._start_body(ex, now, *parse_head(data[pos:cut]))
            ex.retry_after_s = retry_after_s(data[pos:cut], ex.status)
            return cut + 4
        cut = data.find(b"\r\n", pos)
        if cut < 0:
            return -1
        if state == _TRAILER and cut == pos:
            self._complete(ex, now)
        return cut + 2

    def _start_body(
        self, ex: Exchange, now: float, status: int, chunked: bool, length: int | None, close: bool
    ) -> None:
        if status < 200:  # 1xx: another head follows
            return
        ex.status, ex.keep_alive = status, not close
        if chunked:
            self.state = _SIZE
        elif length is not None:
            self.state, self.remaining = _LENGTH, length
            if length == 0:
                self._complete(ex, now)
        else:
            self.state, ex.keep_alive = _EOF, False

    def _body(self, ex: Exchange, data: bytes, now: float) -> None:
        if ex.status == 200:
            ex.sink(data, now)
        elif len(ex.error_body) < ERROR_BODY_BYTES:
            ex.error_body += data[: ERROR_BODY_BYTES - len(ex.error_body)]

    def _complete(self, ex: Exchange, now: float) -> None:
        self.exchange, self.state = None, _IDLE
        ex.done_at = now
        if ex.keep_alive and not self.closed and not self.buf:
            self.pool.release(self)
        else:
            self.abort()
        ex.finish(None)

    def _fail(self, exc: BaseException) -> None:
        ex, self.exchange, self.state = self.exchange, None, _IDLE
        self.abort()
        if ex is not None:
            ex.done_at = clock()
            ex.finish(exc)


class Pool:
    """Keep-alive connections to one origin (``http://host:port``), LIFO free list, unbounded."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        self.authority = parts.netloc.rsplit("@", 1)[-1]
        self.free: list[_Conn] = []
        self.live: set[_Conn] = set()
        self.extra_head = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        """Headers every request carries (``Authorization``, ``--header``), already validated for the wire."""

    def request_bytes(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        """A POST with ``body`` and the pool's headers, ready for the wire."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.authority}\r\nContent-Type: {content_type}\r\n"
            f"Accept: text/event-stream\r\n{self.extra_head}Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body

    async def _connect(self, deadline: float) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                _, conn = await loop.create_connection(
                    lambda: _Conn(self), self.host, self.port, ssl=self.ssl
                )
        except TimeoutError:
            raise RequestTimeout(f"connecting to {self.host}:{self.port} timed out") from None
        except OSError as exc:
            raise ConnectFailed(f"{self.host}:{self.port}: {exc}") from None
        self.live.add(conn)
        return conn

    def take(self) -> _Conn | None:
        """An idle keep-alive connection, or None."""
        free = self.free
        while free:
            conn = free.pop()
            if not conn.closed:
                conn.reused = True
                return conn
        return None

    def release(self, conn: _Conn) -> None:
        self.free.append(conn)

    def forget(self, conn: _Conn) -> None:
        self.live.discard(conn)

    def submit(self, payload: bytes, sink: BodySink, timeout_s: float, on_done: OnDone) -> None:
        """Send ``payload`` (on an idle connection, else a new one) and call ``on_done(exchange, error)``
        once the whole response is in or it failed; body bytes go to ``sink`` as they arrive."""
        loop = asyncio.get_running_loop()
        _Attempt(self, loop, payload, sink, loop.time() + timeout_s, on_done).start()

    async def exchange(self, payload: bytes, sink: BodySink, timeout_s: float) -> Exchange:
        """:meth:`submit` as a coroutine: the exchange, or its error raised."""
        future: asyncio.Future[Exchange] = asyncio.get_running_loop().create_future()

        def done(ex: Exchange | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                assert ex is not None
                future.set_result(ex)

        self.submit(payload, sink, timeout_s, done)
        return await future

    def close(self) -> None:
        for conn in list(self.live):
            conn.abort()
        self.live.clear()
        self.free.clear()


class _Attempt:
    """Drives one request by callbacks (no task): connection, send, timeout, one retry on a stale one."""

    __slots__ = ("conn", "deadline", "loop", "on_done", "payload", "pool", "retried", "sink", "timer")

    def __init__(
        self,
        pool: Pool,
        loop: asyncio.AbstractEventLoop,
        payload: bytes,
        sink: BodySink,
        deadline: float,
        on_done: OnDone,
    ) -> None:
        self.pool, self.loop, self.payload, self.sink = pool, loop, payload, sink
        self.deadline, self.on_done = deadline, on_done
        self.retried = False
        self.conn: _Conn | None = None
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        conn = self.pool.take()
        if conn is not None:
            self._send(conn)
            return
        task = self.loop.create_task(self.pool._connect(self.deadline))
        task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[_Conn]) -> None:
        if task.cancelled():
            self.on_done(None, asyncio.CancelledError())
        elif (error := task.exception()) is not None:
            self.on_done(None, error)
        else:
            self._send(task.result())

    def _send(self, conn: _Conn) -> None:
        self.conn = conn
        ex = Exchange(self.sink, self._finished)
        self.timer = self.loop.call_at(self.deadline, conn.expire)
        conn.send(ex, self.payload)

    def _finished(self, ex: Exchange, error: BaseException | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        conn = self.conn
        if (
            isinstance(error, Dropped)
            and not self.retried
            and conn is not None
            and conn.reused
            and not ex.received
        ):
            self.retried = True
            self.start()
            return
        self.on_done(ex, error)

"""The mock OpenAI-compatible server on ``asyncio`` with hand-rolled HTTP/1.1 and SSE.

Why not FastAPI/uvicorn: at 1,000 streams/s of 32 tokens the mock writes 32,000 events/s; a timer
per token plus one ``transport.write`` (pre-encoded bytes) costs a few µs, where an ASGI stack costs
tens of µs per event and per request. The mock must never be the bottleneck, so it also measures
its own lateness (``GET /mock/stats``; ``POST /mock/reset`` clears it).

Timing: a request is admitted when fewer than ``max_concurrency`` streams run (else it queues, as in
a server's batch); token ``k`` (0-based) is due at ``admit + ttft + k · itl`` on the loop clock, so
lateness never accumulates.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import random
import time
from collections import deque
from typing import Any

from gpuplan.adapters.bench.mock import http
from gpuplan.adapters.bench.mock.config import MockConfig
from gpuplan.adapters.bench.mock.payloads import model_list, prompt_text, token_payload
from gpuplan.adapters.bench.mock.stats import LatenessStats
from gpuplan.adapters.bench.tokens import estimate_tokens

ROUTES = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
EARLY_S = 0.0005
"""epoll sleeps in whole milliseconds (asyncio rounds the timeout up), so a timer fires 0–1 ms late;
arming every timer 0.5 ms early centres that error on zero. Lateness is recorded signed."""


class MockServer:
    """One mock server on one event loop; ``start`` binds, ``close`` stops."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.stats = LatenessStats()
        self.rng = random.Random(config.seed)
        self.active = 0
        self.waiting: deque[_Stream] = deque()
        self._server: asyncio.Server | None = None
        self._counter = 0
        self.slots: dict[int, list[tuple[_Stream, float]]] = {}

    async def start(self) -> int:
        """Bind and listen; returns the port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.config.host, self.config.port, backlog=4096, reuse_address=True
        )
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def draw_fault(self) -> str | None:
        u = self.rng.random()
        for name, cumulative in self.config.fault_table():
            if u < cumulative:
                self.stats.faults[name] = self.stats.faults.get(name, 0) + 1
                return name
        return None

    def next_id(self) -> int:
        self._counter += 1
        return self._counter

    def admit(self, stream: _Stream) -> None:
        if self.active < self.config.max_concurrency:
            self._run(stream)
        else:
            self.waiting.append(stream)

    def _run(self, stream: _Stream) -> None:
        self.active += 1
        self.stats.max_active = max(self.stats.max_active, self.active)
        stream.start()

    def token_at(self, stream: _Stream, due: float) -> None:
        """Token timers share one timer per millisecond slot: ``due − EARLY_S`` rounded to the ms (±0.5 ms,
        centred, like epoll's own rounding), so a token costs a list append, not a timer of its own."""
        key = round((due - EARLY_S) * 1e3)
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = []
            asyncio.get_running_loop().call_at(key / 1e3, self._fire, key)
        slot.append((stream, due))

    def _fire(self, key: int) -> None:
        for stream, due in self.slots.pop(key, ()):
            if stream.running:
                stream.send_token(due)

    def release(self) -> None:
        self.active -= 1
        while self.waiting and self.active < self.config.max_concurrency:
            stream = self.waiting.popleft()
            if not stream.conn.closed:
                self._run(stream)


class _Connection(asyncio.Protocol):
    """One client connection: parse requests in order, one response at a time."""

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.stream: _Stream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.stream is not None:
            self.stream.abandon()

    def data_received(self, data: bytes) -> None:
        self.buffer.extend(data)
        self.pump()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def pump(self) -> None:
        while not self.busy and not self.closed:
            try:
                request = http.parse(self.buffer)
            except http.BadRequest as exc:
                self.write(http.response(400, {"error": {"message": str(exc)}}, keep_alive=False))
                self.abort(graceful=True)
                return
            if request is None:
                return
            self.handle(request)

    def done(self, keep_alive: bool = True) -> None:
        self.busy = False
        self.stream = None
        if not keep_alive:
            self.abort(graceful=True)
        elif self.buffer:
            self.pump()

    def abort(self, graceful: bool = False) -> None:
        if self.transport is not None and not self.closed:
            if graceful:
                self.transport.close()
            else:
                self.transport.abort()
        self.closed = True

    def refused(self, request: http.Request) -> bool:
        """Answer 401 when the mock has a key and a ``/v1`` request does not carry it (as vLLM does)."""
        key = self.server.config.api_key
        if key is None or not request.path.startswith("/v1"):
            return False
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode("latin-1"), f"Bearer {key}".encode("latin-1")):
            return False
        self.write(http.response(401, {"error": "Unauthorized"}, keep_alive=request.keep_alive))
        self.done(request.keep_alive)
        return True

    def handle(self, request: http.Request) -> None:
        if self.refused(request):
            return None
        if request.method == "GET" and request.path in ("/health", "/v1/models", "/mock/stats"):
            self.write(http.response(200, self._info(request.path), keep_alive=request.keep_alive))
            return self.done(request.keep_alive)
        if request.method == "GET" and request.path == "/metrics":
            server = self.server
            text = server.stats.prometheus(server.active, len(server.waiting), server.config.max_concurrency)
            self.write(
                http.text_response(200, text, "text/plain; version=0.0.4", keep_alive=request.keep_alive)
            )
            return self.done(request.keep_alive)
        if request.method == "POST" and request.path == "/mock/reset":
            self.server.stats.reset()
            self.write(http.response(200, {"reset": True}, keep_alive=request.keep_alive))
            return self.done(request.keep_alive)
        api = ROUTES.get(request.path) if request.method == "POST" else None
        if api is None:
            self.write(
                http.response(404, {"error": {"message": f"no route {request.method} {request.path}"}})
            )
            return self.done(request.keep_alive)
        try:
            body = request.json()
        except http.BadRequest as exc:
            self.write(http.response(400, {"error": {"message": str(exc)}}))
            return self.done(request.keep_alive)
        self.start_generation(api, body, request.keep_alive)

    def _info(self, path: str) -> dict[str, Any]:
        if path == "/mock/stats":
            return self.server.stats.snapshot() | {"config": self.server.config.model_dump()}
        if path == "/v1/models":
            return model_list(self.server.config)
        return {"status": "ok"}

    def start_generation(self, api: str, body: dict[str, Any], keep_alive: bool) -> None:
        server = self.server
        served = server.config.served_model_names
        if served and body.get("model") not in served:
            message = f"The model `{body.get('model')}` does not exist."
            error = {
                "object": "error",
                "message": message,
                "type": "NotFoundError",
                "param": None,
                "code": 404,
            }
            self.write(http.response(404, error, keep_alive=keep_alive))
            return self.done(keep_alive)
        server.stats.requests += 1
        fault = server.draw_fault()
        if fault in ("500", "429"):
            status = int(fault or 0)
            wait = server.config.retry_after_s
            extra = f"retry-after: {wait}\r\n" if status == 429 and wait is not None else ""
            payload = {"error": {"message": f"mock fault {status}", "code": status}}
            self.write(http.response(status, payload, extra=extra))
            return self.done(keep_alive)
        self.busy = True
        self.stream = _Stream(self, api, body, fault, keep_alive)
        server.admit(self.stream)


class _Stream:
    """One generation: headers, then one SSE event per token on an absolute schedule."""

    def __init__(
        self, conn: _Connection, api: str, body: dict[str, Any], fault: str | None, keep_alive: bool
    ):
        self.conn = conn
        self.server = conn.server
        self.loop = asyncio.get_running_loop()
        self.api = api
        self.fault = fault
        self.keep_alive = keep_alive
        self.streaming = bool(body.get("stream", False))
        self.model = str(body.get("model", "mock"))
        self.tokens = int(
            body.get("max_tokens")
            or body.get("max_completion_tokens")
            or self.server.config.default_output_tokens
        )
        self.prompt_tokens = estimate_tokens(prompt_text(api, body))
        eos = self.server.config.eos_after_tokens
        stops = eos is not None and not body.get("ignore_eos") and eos < self.tokens
        self.tokens, self.finish_reason = (
            (eos, "stop") if stops and eos is not None else (self.tokens, "length")
        )
        options = body.get("stream_options") or {}
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.sent = 0
        self.t0 = 0.0
        self.arrival = self.last = self.loop.time()  # server-side TTFT, ITL, E2E, queue time are from these
        self.handle: asyncio.TimerHandle | None = None
        self.running = False
        self.ident = f"cmpl-mock-{self.server.next_id()}"
        self.token_event = http.sse(token_payload(api, self.ident, self.model, None))

    def start(self) -> None:
        cfg = self.server.config
        self.running = True
        self.server.stats.queue(self.loop.time() - self.arrival)
        self.t0 = self.loop.time() + (cfg.slow_first_byte_ms / 1e3 if self.fault == "slow" else 0.0)
        if not self.streaming:
            due = self.t0 + (cfg.ttft_ms + cfg.itl_ms * max(self.tokens - 1, 0)) / 1e3
            self.handle = self.loop.call_at(due - EARLY_S, self.respond_whole, due)
            return
        if self.fault == "slow":
            self.handle = self.loop.call_at(self.t0, self.send_head, self.t0)
        else:
            self.send_head(self.t0)

    def send_head(self, due: float) -> None:
        self.conn.write(http.STREAM_HEAD)
        first = self.t0 + self.server.config.ttft_ms / 1e3
        self.server.token_at(self, first)

    def send_token(self, due: float) -> None:
        now, stats = self.loop.time(), self.server.stats
        stats.record((now - due) * 1e3)
        if self.sent:
            stats.itl(now - self.last)
        else:
            stats.ttft(now - self.arrival)
        self.last = now
        self.sent += 1
        half = max(self.tokens // 2, 1)
        if self.fault == "drop" and self.sent == half:
            self.finish(aborted=True)
            return
        if self.fault == "malformed" and self.sent == half:
            self.conn.write(http.chunk(b'data: {"choices": [{"text": \n\n'))
        if self.sent < self.tokens:
            self.conn.write(self.token_event)
            due += self.server.config.itl_ms / 1e3
            self.server.token_at(self, due)
            return
        out = [
            self.token_event,
            http.sse(token_payload(self.api, self.ident, self.model, self.finish_reason)),
        ]
        if self.include_usage:
            out.append(http.sse(self._usage_payload()))
        out += [http.sse("[DONE]"), http.LAST_CHUNK]
        self.conn.write(b"".join(out))
        self.finish()

    def respond_whole(self, due: float) -> None:
        self.server.stats.record((self.loop.time() - due) * 1e3)
        text = " the" * self.tokens
        choice: dict[str, Any] = (
            {"index": 0, "text": text, "finish_reason": self.finish_reason}
            if self.api == "completions"
            else {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self.finish_reason,
            }
        )
        obj = "text_completion" if self.api == "completions" else "chat.completion"
        payload = self._usage_payload() | {"object": obj, "choices": [choice]}
        self.conn.write(http.response(200, payload, keep_alive=self.keep_alive))
        self.finish()

    def _usage_payload(self) -> dict[str, Any]:
        usage = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.tokens,
            "total_tokens": self.prompt_tokens + self.tokens,
        }
        obj = "text_completion" if self.api == "completions" else "chat.completion.chunk"
        return {
            "id": self.ident,
            "object": obj,
            "created": int(time.time()),
            "model": self.model,
            "choices": [],
            "usage": usage,
        }

    def finish(self, aborted: bool = False) -> None:
        if not self.running:
            return
        self.running = False
        self.server.release()
        if aborted:
            self.conn.abort()
            return
        stats = self.server.stats
        stats.completed += 1
        stats.finished[self.finish_reason] += 1
        stats.prompt_tokens += self.prompt_tokens
        stats.generation_tokens += self.tokens
        stats.e2e(self.loop.time() - self.arrival)
        self.conn.done(self.keep_alive)

    def abandon(self) -> None:
        """The client went away: stop the timer and free the slot."""
        if self.handle is not None:
            self.handle.cancel()
        self.finish(aborted=True)


async def serve_forever(config: MockConfig, ready: Any = None) -> None:
    """Run until cancelled; ``ready(port)`` is called once listening."""
    server = MockServer(config)
    port = await server.start()
    if ready is not None:
        ready(port)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def run(config: MockConfig, ready: Any = None) -> None:
    """Blocking entry point for the CLI: serve until interrupted."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(config, ready))

"""One streaming request against an OpenAI-compatible endpoint, timed event by event.

Tokens: a server-reported ``usage`` wins; otherwise each SSE event that carries text counts as one
token (true for vLLM, SGLang, TGI and the mock, which send one token per event). ITLs are the gaps
between consecutive text-carrying events. Error kinds: ``http_<status>``, ``timeout``, ``connect``,
``dropped`` (connection lost mid-response), ``malformed_sse``, ``incomplete`` (no ``[DONE]``/no
token), ``other``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from gpuplan.bench.load.config import LoadConfig
from gpuplan.bench.load.record import RequestRecord


class MalformedSSE(Exception):
    """An SSE ``data:`` payload that is not JSON."""


@dataclass(slots=True)
class _Stream:
    """What the SSE parser has seen so far."""

    token_times: list[float] = field(default_factory=list)
    done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def request_body(config: LoadConfig, prompt: str) -> bytes:
    body: dict[str, Any] = {"model": config.model, "max_tokens": config.output_tokens, "stream": True,
                            "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0.0}
    if config.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode()


def _text_of(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return str(choice.get("text") or "")
    delta = choice.get("delta") or {}
    return str(delta.get("content") or delta.get("reasoning_content") or "")


def _event(state: _Stream, raw: bytes, now: float) -> None:
    data = b"".join(line[5:].strip() for line in raw.split(b"\n") if line.startswith(b"data:"))
    if not data:
        return
    if data == b"[DONE]":
        state.done = True
        return
    try:
        payload = json.loads(data)
    except ValueError:
        raise MalformedSSE(data[:80].decode(errors="replace")) from None
    if not isinstance(payload, dict):
        raise MalformedSSE("event is not a JSON object")
    choices = payload.get("choices") or []
    if choices and isinstance(choices[0], dict) and _text_of(choices[0]):
        state.token_times.append(now)
    usage = payload.get("usage")
    if isinstance(usage, dict):
        state.prompt_tokens = usage.get("prompt_tokens", state.prompt_tokens)
        state.completion_tokens = usage.get("completion_tokens", state.completion_tokens)


async def _read_sse(response: httpx.Response, state: _Stream) -> None:
    loop = asyncio.get_running_loop()
    buffer = b""
    async for piece in response.aiter_raw():
        now = loop.time()
        buffer += piece.replace(b"\r\n", b"\n") if b"\r" in piece else piece
        while (cut := buffer.find(b"\n\n")) >= 0:
            _event(state, buffer[:cut], now)
            buffer = buffer[cut + 2 :]
    if buffer.strip():
        _event(state, buffer, loop.time())


def classify(exc: BaseException) -> str:
    """The error kind of an exception raised while sending or reading."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "dropped"
    if isinstance(exc, MalformedSSE):
        return "malformed_sse"
    return "other"


async def send(client: httpx.AsyncClient, config: LoadConfig, body: bytes, index: int,
               scheduled_s: float, origin: float, warmup: bool, input_tokens: int) -> RequestRecord:
    """Send one request now; never raises (failures become the record's ``error``)."""
    loop = asyncio.get_running_loop()
    sent = loop.time()
    state = _Stream()
    status: int | None = None
    error: str | None = None
    detail: str | None = None
    try:
        async with asyncio.timeout(config.request_timeout_s):
            async with client.stream("POST", config.endpoint, content=body,
                                     headers={"content-type": "application/json"}) as response:
                status = response.status_code
                if status != 200:
                    detail = (await response.aread())[:200].decode(errors="replace")
                    error = f"http_{status}"
                else:
                    await _read_sse(response, state)
    except Exception as exc:  # every failure is a result, not a crash
        error, detail = classify(exc), f"{type(exc).__name__}: {exc}"[:200]
    if error is None and (not state.done or not state.token_times):
        error, detail = "incomplete", "stream ended without [DONE] or without any token"
    done = loop.time()
    return _record(state, index, scheduled_s + origin, sent, done, origin, warmup, status, error, detail,
                   input_tokens)


def _record(state: _Stream, index: int, scheduled: float, sent: float, done: float, origin: float,
            warmup: bool, status: int | None, error: str | None, detail: str | None,
            input_tokens: int) -> RequestRecord:
    times = state.token_times
    out = state.completion_tokens if state.completion_tokens is not None else len(times)
    common: dict[str, Any] = {
        "index": index, "scheduled_s": scheduled - origin, "sent_s": sent - origin, "done_s": done - origin,
        "warmup": warmup, "status": status, "error": error, "error_detail": detail,
        "input_tokens": state.prompt_tokens if state.prompt_tokens is not None else input_tokens,
        "output_tokens": out, "usage_reported": state.completion_tokens is not None,
    }
    if error is not None or not times:
        return RequestRecord(**common)
    ttft, e2e = (times[0] - sent) * 1e3, (done - sent) * 1e3
    late = (sent - scheduled) * 1e3
    tpot = (e2e - ttft) / (out - 1) if out > 1 else None
    itl = tuple((b - a) * 1e3 for a, b in itertools.pairwise(times))
    return RequestRecord(**common, ttft_ms=ttft, ttft_sched_ms=ttft + late, e2e_ms=e2e,
                         e2e_sched_ms=e2e + late, tpot_ms=tpot, itl_ms=itl)

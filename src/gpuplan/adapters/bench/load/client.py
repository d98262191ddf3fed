"""One streaming request against an OpenAI-compatible endpoint, timed event by event.

The SSE parser reads only what the metrics need: ``data:`` lines (comments, ``event:``/``id:`` lines
are skipped), the arrival time of each text-carrying event (first token, ITLs), ``usage`` and the
finish reason. Tokens: each SSE event that carries text counts as one token (true for vLLM, SGLang,
TGI and the mock, which send one token per event); a server-reported ``usage.completion_tokens`` wins
when it is believable (:func:`usage_problem`), else the request fails. Error kinds: ``http_<status>``,
``timeout``, ``connect``, ``dropped`` (connection lost mid-response), ``malformed_sse``, ``incomplete``
(no token, or a body that ended with neither ``[DONE]`` nor a ``finish_reason``: ``transformers serve``
ends its streams with the ``usage`` event and no ``[DONE]``, and ``vllm bench serve`` does not require
it either), ``usage_invalid`` (a ``usage`` count that is not a non-negative integer),
``usage_mismatch`` (``usage.completion_tokens`` out of tolerance of the streamed token events),
``other`` (anything else, a client bug included: a request is never lost to an exception).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from json.scanner import make_scanner
from typing import Any

from gpuplan.adapters.bench.load.body import request_body
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.wire import Exchange, Pool, WireError, clock
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.redact import mask_secrets

__all__ = [
    "MAX_EVENT_BYTES",
    "USAGE_FIELDS",
    "USAGE_TOKENS_PER_EVENT_MAX",
    "Keep",
    "MalformedSSE",
    "OversizedEvent",
    "classify",
    "request_body",
    "send",
    "start",
    "usage_problem",
]

Keep = Callable[[RequestRecord, float | None], None]
"""Where a finished request goes: its record and the ``Retry-After`` seconds its answer asked for."""

_scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: wants the C class
"""The C scanner behind ``json.loads``, without its wrappers (≈ 2 µs less per event)."""


USAGE_TOKENS_PER_EVENT_MAX = 16
"""The most tokens one text event may carry for ``usage.completion_tokens`` to be believed. Servers
stream one token per event, or several when they decode several per step or batch the stream:
speculative decoding sends up to draft length + 1 (typical drafts: 1-7 tokens), SGLang's
``--stream-interval N`` sends N; 16 covers both with room. A larger claim (``10**12`` for 8 events) is
not a measurement, and a smaller count than the events (each text event is at least one token) is not
one either."""
USAGE_FIELDS = ("prompt_tokens", "completion_tokens")


MAX_EVENT_BYTES = 1 << 20
"""The longest SSE event (or unfinished line) the parser holds: 1 MiB. A streamed chunk carries a few
tokens' text and, with ``logprobs``, at most 20 alternatives per token
(https://platform.openai.com/docs/api-reference/completions/create, ``logprobs`` max 5; chat
``top_logprobs`` max 20), a few KiB; a longer one is not a token event, and holding it (or a line that
never ends) would grow memory until the request timeout and cost quadratic time to rejoin."""


class MalformedSSE(WireError):
    """An SSE ``data:`` payload that is not a JSON object."""

    kind = "malformed_sse"


class OversizedEvent(WireError):
    """An SSE event or line over ``MAX_EVENT_BYTES``."""

    kind = "oversized_event"


@dataclass(slots=True)
class _Stream:
    """What the SSE parser has seen so far."""

    token_times: list[float] = field(default_factory=list)
    done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    bad_usage: str | None = None
    """A ``usage`` count that is not a non-negative integer, as received (for the error detail)."""
    partial: bytes = b""
    data: list[bytes] = field(default_factory=list)
    held: int = 0
    """Bytes of the ``data:`` lines of the event being read."""

    def feed(self, chunk: bytes, now: float) -> None:
        """Body bytes as they arrive; complete events are handled at once, stamped ``now``."""
        if (
            not self.partial
            and not self.data
            and chunk.startswith(b"data:")
            and chunk.endswith(b"\n\n")
            and chunk.count(b"\n") == 2
            and len(chunk) <= MAX_EVENT_BYTES
        ):  # the common case: one single-line event per chunk
            _event(self, chunk[5:-2].strip(), now)
            return
        if self.partial:
            chunk, self.partial = self.partial + chunk, b""
        lines = chunk.split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                self.data.append(line[5:].strip())
                self.held += len(line)
                if self.held > MAX_EVENT_BYTES:
                    break
            elif self.data and (not line or line == b"\r"):
                _event(self, self.data[0] if len(self.data) == 1 else b"".join(self.data), now)
                self.data, self.held = [], 0
        if self.held + len(self.partial) > MAX_EVENT_BYTES:
            raise OversizedEvent(f"an SSE event over {MAX_EVENT_BYTES} bytes")

    def close(self, now: float) -> None:
        """End of body: an event not followed by a blank line still counts."""
        if self.partial:
            self.feed(b"\n\n", now)
        elif self.data:
            self.feed(b"\n", now)


def _has_text(choice: dict[str, Any]) -> bool:
    if "text" in choice:
        return bool(choice["text"])
    delta = choice.get("delta")
    return isinstance(delta, dict) and bool(delta.get("content") or delta.get("reasoning_content"))


_TEXT = re.compile(rb'"(?:text|content|reasoning_content)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*"([^"\\]+)"')
_USAGE = re.compile(rb'"usage":\s*\{')


def _event(state: _Stream, data: bytes, now: float) -> None:
    """One ``data:`` payload. Token events are scanned, not decoded: a text-carrying event has a non-empty
    ``text``/``content``/``reasoning_content`` string; events with a ``usage`` object, or not shaped like a
    JSON object, are decoded in full (so a truncated or non-JSON event is ``malformed_sse``)."""
    if data == b"[DONE]":
        state.done = True
        return
    if data[:1] == b"{" and data[-1:] == b"}" and _USAGE.search(data) is None:
        if _TEXT.search(data) is not None:
            state.token_times.append(now)
        if b'"finish_reason":null' not in data and (found := _FINISH.search(data)) is not None:
            state.finish_reason = found.group(1).decode(errors="replace")
        return
    _decoded(state, data, now)


def _decoded(state: _Stream, data: bytes, now: float) -> None:
    try:
        text = data.decode()
        payload, end = _scan(text, 0)
    except (ValueError, StopIteration):
        raise MalformedSSE(data[:80].decode(errors="replace")) from None
    if end != len(text):
        raise MalformedSSE(f"trailing bytes after the JSON event: {text[end : end + 40]!r}")
    if not isinstance(payload, dict):
        raise MalformedSSE("event is not a JSON object")
    choices = payload.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise MalformedSSE(f"choices is a {type(choices).__name__}, not a list")
    if choices and isinstance(choices[0], dict):
        choice = choices[0]
        if _has_text(choice):
            state.token_times.append(now)
        if choice.get("finish_reason"):
            state.finish_reason = str(choice["finish_reason"])
    usage = payload.get("usage")
    if isinstance(usage, dict):
        _usage(state, usage)


def _usage(state: _Stream, usage: dict[str, Any]) -> None:
    """Keep the usage counts that are non-negative integers (a JSON ``true`` is not one); note the rest."""
    for name in USAGE_FIELDS:
        if name not in usage or usage[name] is None:
            continue
        value = usage[name]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            setattr(state, name, value)
        else:
            setattr(state, name, None)
            state.bad_usage = f"usage.{name} = {value!r}"[:80]


def usage_problem(*, completion_tokens: int | None, token_events: int) -> str | None:
    """Why a server's ``usage.completion_tokens`` cannot be believed, or None when it can (or is absent):
    it must lie in ``[token_events, token_events * USAGE_TOKENS_PER_EVENT_MAX]``."""
    if completion_tokens is None:
        return None
    high = token_events * USAGE_TOKENS_PER_EVENT_MAX
    if token_events <= completion_tokens <= high:
        return None
    return (
        f"usage.completion_tokens = {completion_tokens} but {token_events} token events arrived "
        f"(believed within {token_events}..{high})"
    )


def classify(exc: BaseException) -> str:
    """The error kind of an exception raised while sending or reading."""
    if isinstance(exc, WireError):
        return exc.kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionError):
        return "dropped"
    return "other"


def start(
    pool: Pool,
    config: LoadConfig,
    payload: bytes,
    index: int,
    scheduled_s: float,
    origin: float,
    warmup: bool,
    input_tokens: int,
    keep: Keep,
) -> None:
    """Send one request (``payload``: the HTTP request bytes) now, driven by callbacks (no task);
    ``keep`` gets its record and the server's ``Retry-After`` (s, or None) when it ends. Never raises for
    request failures (they become ``error``)."""
    sent = clock()
    state = _Stream()

    def done(ex: Exchange | None, error: BaseException | None) -> None:
        record = _safe_finish(
            state, ex, error, index, scheduled_s + origin, sent, origin, warmup, input_tokens
        )
        keep(_masked(record, config), ex.retry_after_s if ex is not None else None)

    pool.submit(payload, state.feed, config.request_timeout_s, done)


def _masked(record: RequestRecord, config: LoadConfig) -> RequestRecord:
    """The record with the run's secrets masked in its error detail (a server may echo a header back)."""
    if record.error_detail is None or not (secrets := config.secrets()):
        return record
    return record.model_copy(update={"error_detail": mask_secrets(record.error_detail, secrets)})


async def send(
    pool: Pool,
    config: LoadConfig,
    payload: bytes,
    index: int,
    scheduled_s: float,
    origin: float,
    warmup: bool,
    input_tokens: int,
) -> tuple[RequestRecord, float | None]:
    """:func:`start` as a coroutine returning the record and the server's ``Retry-After`` (s, or None)."""
    sent = clock()
    state = _Stream()
    ex: Exchange | None = None
    error: BaseException | None = None
    try:
        ex = await pool.exchange(payload, state.feed, config.request_timeout_s)
    except Exception as exc:  # every failure is a result, not a crash
        error = exc
    record = _safe_finish(state, ex, error, index, scheduled_s + origin, sent, origin, warmup, input_tokens)
    return _masked(record, config), ex.retry_after_s if ex is not None else None


def _safe_finish(
    state: _Stream,
    ex: Exchange | None,
    error: BaseException | None,
    index: int,
    scheduled: float,
    sent: float,
    origin: float,
    warmup: bool,
    input_tokens: int,
) -> RequestRecord:
    """:func:`_finish`, whose own failure (a response no rule foresaw, or a bug) still gives a record:
    error ``other``, no timings, the token events counted. Both loops end every request here, so no
    response can lose a request or stop a run."""
    try:
        return _finish(state, ex, error, index, scheduled, sent, origin, warmup, input_tokens)
    except Exception as exc:
        blank = _Stream(token_times=state.token_times)
        detail = f"{type(exc).__name__}: {exc}"[:200]
        status = ex.status if ex is not None and ex.status else None
        return _record(
            blank, index, scheduled, sent, clock(), origin, warmup, status, "other", detail, input_tokens
        )


def _finish(
    state: _Stream,
    ex: Exchange | None,
    error: BaseException | None,
    index: int,
    scheduled: float,
    sent: float,
    origin: float,
    warmup: bool,
    input_tokens: int,
) -> RequestRecord:
    status = ex.status if ex is not None and ex.status else None
    done = ex.done_at if ex is not None and ex.done_at else clock()
    kind: str | None = None
    detail: str | None = None
    if error is not None:
        kind, detail = classify(error), f"{type(error).__name__}: {error}"[:200]
    elif ex is not None and status != 200:
        kind, detail = f"http_{status}", ex.error_body[:200].decode(errors="replace")
    else:
        try:
            state.close(done)
        except MalformedSSE as exc:
            kind, detail = exc.kind, f"MalformedSSE: {exc}"[:200]
    if kind is None and (not (state.done or state.finish_reason) or not state.token_times):
        kind, detail = "incomplete", "stream ended without [DONE] or finish_reason, or without any token"
    usage_kind, usage_detail = _check_usage(state)
    if kind is None:
        kind, detail = usage_kind, usage_detail
    return _record(state, index, scheduled, sent, done, origin, warmup, status, kind, detail, input_tokens)


def _check_usage(state: _Stream) -> tuple[str | None, str | None]:
    """The usage error of this stream, if any; an unbelievable ``completion_tokens`` is dropped, so the
    record keeps the streamed token events as its ``output_tokens`` (``usage_reported`` false): what the
    client saw arrive is measured, the claim is not, and the events are a floor on what was generated.
    The request fails either way, so its tokens never reach a summary's means or rates."""
    if state.bad_usage is not None:
        return "usage_invalid", f"{state.bad_usage}: not a non-negative integer"
    problem = usage_problem(completion_tokens=state.completion_tokens, token_events=len(state.token_times))
    if problem is None:
        return None, None
    state.completion_tokens = None
    return "usage_mismatch", problem


def _record(
    state: _Stream,
    index: int,
    scheduled: float,
    sent: float,
    done: float,
    origin: float,
    warmup: bool,
    status: int | None,
    error: str | None,
    detail: str | None,
    input_tokens: int,
) -> RequestRecord:
    times = state.token_times
    out = state.completion_tokens if state.completion_tokens is not None else len(times)
    common: dict[str, Any] = {
        "index": index,
        "scheduled_s": scheduled - origin,
        "sent_s": sent - origin,
        "done_s": done - origin,
        "warmup": warmup,
        "status": status,
        "error": error,
        "error_detail": detail,
        "input_tokens": state.prompt_tokens if state.prompt_tokens is not None else input_tokens,
        "output_tokens": out,
        "usage_reported": state.completion_tokens is not None,
        "finish_reason": state.finish_reason,
    }
    if error is not None or not times:
        return RequestRecord(**common)
    ttft, e2e = (times[0] - sent) * 1e3, (done - sent) * 1e3
    late = (sent - scheduled) * 1e3
    tpot = (e2e - ttft) / (out - 1) if out > 1 else None
    itl = tuple((b - a) * 1e3 for a, b in itertools.pairwise(times))
    return RequestRecord(
        **common,
        ttft_ms=ttft,
        ttft_sched_ms=ttft + late,
        e2e_ms=e2e,
        e2e_sched_ms=e2e + late,
        tpot_ms=tpot,
        itl_ms=itl,
    )

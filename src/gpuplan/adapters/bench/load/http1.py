"""HTTP/1.1 response framing helpers, one exchange's state and the wire errors of the load tester's client
(``wire``)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

BodySink = Callable[[bytes, float], None]


class Exchange:
    """One request/response on a connection: status, error body, completion time; ``on_done(self, error)``
    is called exactly once, from the protocol, when the response is complete or failed."""

    __slots__ = (
        "done_at",
        "error_body",
        "finished",
        "keep_alive",
        "on_done",
        "received",
        "retry_after_s",
        "sink",
        "status",
    )

    def __init__(self, sink: BodySink, on_done: Callable[[Exchange, BaseException | None], None]) -> None:
        self.sink = sink
        self.on_done = on_done
        self.status = 0
        self.retry_after_s: float | None = None
        self.error_body = b""
        self.received = False
        self.keep_alive = True
        self.finished = False
        self.done_at = 0.0

    def finish(self, error: BaseException | None) -> None:
        if not self.finished:
            self.finished = True
            self.on_done(self, error)


class WireError(Exception):
    """A request failed on the wire; ``kind`` is its error class in the records."""

    kind = "other"


class ConnectFailed(WireError):
    kind = "connect"


class Dropped(WireError):
    kind = "dropped"


class RequestTimeout(WireError):
    kind = "timeout"


class ProtocolViolation(WireError):
    kind = "other"


def parse_head(raw: bytes) -> tuple[int, bool, int | None, bool]:
    """(status, chunked, content-length, connection close) of a response head without its blank line."""
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        raise ProtocolViolation(f"bad status line {lines[0][:60]!r}") from None
    chunked, length, close = False, None, parts[0] == b"HTTP/1.0"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise ProtocolViolation(f"bad content-length {value[:40]!r}") from None
        elif name == b"connection":
            close = b"close" in value.lower()
    return status, chunked, length, close


MAX_RETRY_AFTER_S = 600.0
"""The longest ``Retry-After`` honoured (a larger one is read as this): a run is not parked for hours."""


RETRY_AFTER_STATUSES = (429, 503)
"""The answers whose ``Retry-After`` is read: RFC 9110 section 10.2.3 names 503 (and redirects), RFC 6585
section 4 adds 429 (https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3,
https://www.rfc-editor.org/rfc/rfc6585#section-4)."""


def retry_after_s(raw: bytes, status: int) -> float | None:
    """Seconds the ``Retry-After`` of a 429/503 response head asks to wait (delay-seconds or an HTTP-date,
    RFC 9110 section 10.2.3), capped at :data:`MAX_RETRY_AFTER_S`; None when absent, unreadable or
    another status."""
    if status not in RETRY_AFTER_STATUSES:
        return None
    for line in raw.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() != b"retry-after":
            continue
        text = value.strip().decode("latin-1")
        if text.isdigit():
            return min(float(text), MAX_RETRY_AFTER_S)
        try:
            when = email.utils.parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
        return min(max(when - time.time(), 0.0), MAX_RETRY_AFTER_S)
    return None


def whole_chunk(data: bytes) -> int:
    """Where the payload starts when ``data`` is exactly one non-empty chunk, else 0."""
    cut = data.find(b"\r\n")
    if cut <= 0 or cut > 8 or not data.endswith(b"\r\n"):
        return 0
    try:
        size = int(data[:cut], 16)
    except ValueError:
        return 0
    return cut + 2 if size > 0 and len(data) == cut + size + 4 else 0

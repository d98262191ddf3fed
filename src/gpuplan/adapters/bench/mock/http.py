"""Just enough HTTP/1.1 for the mock: parse requests from a byte buffer, format responses and chunks.

Keep-alive and ``Content-Length`` bodies only (what OpenAI clients send); no pipelining guarantees
beyond in-order processing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024


class BadRequest(Exception):
    """The bytes are not an HTTP request the mock understands."""


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.body or b"{}")
        except ValueError as exc:
            raise BadRequest(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise BadRequest("body must be a JSON object")
        return data

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


def parse(buffer: bytearray) -> Request | None:
    """Take one complete request off the front of ``buffer``; None if it is not complete yet."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise BadRequest("request head too large")
        return None
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    try:
        method, target, _version = head[0].split(" ", 2)
    except ValueError:
        raise BadRequest(f"bad request line {head[0]!r}") from None
    headers: dict[str, str] = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("chunked request bodies are not supported")
    length = int(headers.get("content-length", "0") or 0)
    if length > MAX_BODY_BYTES:
        raise BadRequest("request body too large")
    if len(buffer) < end + 4 + length:
        return None
    body = bytes(buffer[end + 4 : end + 4 + length])
    del buffer[: end + 4 + length]
    return Request(method, target.split("?", 1)[0], headers, body)


REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


def response(status: int, payload: dict[str, Any], *, keep_alive: bool = True, extra: str = "") -> bytes:
    """A JSON answer; ``extra``: more header lines, each ending in CRLF (``retry-after: 2\\r\\n``)."""
    body = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n{extra}"
        f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


def text_response(status: int, text: str, content_type: str, *, keep_alive: bool = True) -> bytes:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
)
LAST_CHUNK = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    """One HTTP chunk carrying ``data``."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(payload: dict[str, Any] | str) -> bytes:
    """One SSE ``data:`` event, already wrapped in an HTTP chunk."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return chunk(b"data: " + text.encode() + b"\n\n")

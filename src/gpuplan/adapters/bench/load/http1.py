"""HTTP/1.1 response framing helpers and the wire errors of the load tester's client (``wire``)."""

from __future__ import annotations


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

"""Errors as the CLI words them, with an HTTP status: 4xx for anything a request can cause.

Every error body is ``{"error": one line, "field": ..., "exit_code": ...}`` (:class:`ApiError`).
The request-size limit lives here too: a body over ``max_bytes`` is refused with 413 before it is
parsed.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.core.errors import DataError, GpuplanError, InfeasibleError, UnknownNameError, UserInputError
from gpuplan.interfaces.jsonout import finite

MAX_LISTED_ERRORS = 3
"""As describe_validation_error: the first three problems, then '(+N more)'."""


class FiniteJSONResponse(JSONResponse):
    """JSON as the CLI writes it: inf and nan become null (docs/json.md)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(finite(content), allow_nan=False, separators=(",", ":")).encode("utf-8")


def error_response(
    status: int, message: str, *, field: str | None = None, exit_code: int | None = None
) -> Any:
    body = {"error": message, "field": field, "exit_code": exit_code}
    return FiniteJSONResponse(body, status_code=status)


def _status(exc: GpuplanError) -> int:
    if isinstance(exc, UnknownNameError):
        return 404
    if isinstance(exc, UserInputError):
        return 400
    if isinstance(exc, InfeasibleError):
        return 422
    return 500 if isinstance(exc, DataError) else 502


class FieldError(UserInputError):
    """A UserInputError that names the request field it is about (e.g. ``config_json``)."""

    def __init__(self, message: str, *, field: str, hint: str | None = None) -> None:
        self.field = field
        super().__init__(message, hint=hint)


def _printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``), so a key holding a newline stays on one line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [_printable(str(p)) for p in loc]
    return ".".join(parts[1:] if parts[:1] == ["body"] else parts) or "(document)"


def describe_request_errors(errors: list[Any]) -> tuple[str, str | None]:
    """The one line describe_validation_error gives for the same body, and the first field's path."""
    if errors and errors[0].get("type") == "json_invalid":
        detail = errors[0].get("ctx", {}).get("error", "")
        return f"request body is not valid JSON (character {errors[0]['loc'][-1]}: {detail})", None
    parts = [f"{_loc(e['loc'])}: {_printable(str(e['msg']))}" for e in errors[:MAX_LISTED_ERRORS]]
    more = len(errors) - MAX_LISTED_ERRORS
    line = "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    return line, (_loc(errors[0]["loc"]) if errors else None)


async def _gpuplan_error(_: Request, exc: Exception) -> Any:
    assert isinstance(exc, GpuplanError)
    field = (
        exc.kind if isinstance(exc, UnknownNameError) else exc.field if isinstance(exc, FieldError) else None
    )
    return error_response(_status(exc), exc.one_line(), field=field, exit_code=exc.exit_code)


async def _validation_error(_: Request, exc: Exception) -> Any:
    assert isinstance(exc, ValidationError)
    field = _loc(exc.errors()[0]["loc"]) if exc.errors() else None
    return error_response(
        400, describe_validation_error(exc), field=field, exit_code=UserInputError.exit_code
    )


async def _request_error(_: Request, exc: Exception) -> Any:
    assert isinstance(exc, RequestValidationError)
    line, field = describe_request_errors(list(exc.errors()))
    return error_response(422, line, field=field, exit_code=UserInputError.exit_code)


async def _http_error(_: Request, exc: Exception) -> Any:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail))


async def _unexpected(_: Request, exc: Exception) -> Any:
    return error_response(500, f"internal error ({type(exc).__name__}); please report it with the request")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(GpuplanError, _gpuplan_error)
    app.add_exception_handler(ValidationError, _validation_error)
    app.add_exception_handler(RequestValidationError, _request_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


class _BodyTooLarge(HTTPException):
    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body over {max_bytes:,} bytes (the web API's limit)")


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` (Content-Length or streamed) with 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._refuse(_BodyTooLarge(self.max_bytes), scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise _BodyTooLarge(self.max_bytes)
            return message

        try:
            await self.app(scope, limited, send)
        except _BodyTooLarge as exc:  # raised outside a route's body parsing (which answers 413 itself)
            await self._refuse(exc, scope, receive, send)

    @staticmethod
    async def _refuse(exc: HTTPException, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(exc.status_code, str(exc.detail))(scope, receive, send)

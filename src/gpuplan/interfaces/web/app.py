"""The FastAPI app: the one page (``/``), its static files, the JSON API (``/api``), OpenAPI (``/docs``),
``/health`` and ``/metrics`` (:mod:`gpuplan.interfaces.web.metrics`).

plotly.js is served from the installed ``plotly`` package (``/static/vendor/plotly.min.js``), so the
page needs no CDN and no front-end build; without plotly the page still shows tables. Swagger UI
(``/docs``) and ReDoc (``/redoc``) are served from the ``fastapi-offline`` package's copies
(``/static/apidocs/``) when it is installed, so they work offline too; without it they load their
script and CSS from a CDN, as FastAPI does by default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuplan import __version__
from gpuplan.adapters.catalog.loader import Catalog, load_catalog
from gpuplan.interfaces.web.api import router
from gpuplan.interfaces.web.errors import (
    BodyLimit,
    FiniteJSONResponse,
    error_response,
    install_error_handlers,
)
from gpuplan.interfaces.web.metrics import install_health_and_metrics

STATIC_DIR = Path(__file__).parent / "static"
MAX_BODY_BYTES = 256 * 1024
"""Largest request body (a pasted config.json is a few KiB)."""
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'"
)


DOCS_ASSETS_URL = "/static/apidocs"
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def docs_assets() -> Path | None:
    """The folder of Swagger UI's and ReDoc's files in the installed ``fastapi-offline``, None without it."""
    try:
        path = Path(str(resources.files("fastapi_offline") / "static"))
    except ModuleNotFoundError:
        return None
    return path if all((path / name).is_file() for name in DOCS_ASSETS) else None


def _install_docs(app: FastAPI) -> None:
    """``/docs`` and ``/redoc`` from local files when fastapi-offline is installed, else FastAPI's CDN pages."""
    assets = docs_assets()
    title = f"{app.title} API"
    swagger_page = partial(get_swagger_ui_html, openapi_url="/openapi.json", title=title)
    redoc_page = partial(get_redoc_html, openapi_url="/openapi.json", title=title)
    if assets is not None:
        app.mount(DOCS_ASSETS_URL, StaticFiles(directory=assets), name="apidocs")
        swagger_page = partial(
            swagger_page,
            swagger_js_url=f"{DOCS_ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS_URL}/favicon.png",
        )
        redoc_page = partial(
            redoc_page,
            redoc_js_url=f"{DOCS_ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return swagger_page()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return redoc_page()


def plotly_js() -> Path | None:
    """plotly.min.js inside the installed plotly package, None without plotly."""
    try:
        path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


class SecurityHeaders:
    """ASGI middleware: a strict same-origin CSP and nosniff on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-content-type-options", b"nosniff"))
                if not scope.get("path", "").startswith(("/docs", "/redoc")):  # Swagger UI runs inline code
                    headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
"""Host headers a loopback server answers (with the address it listens on): a page another site
loads cannot reach it by a DNS name that resolves to 127.0.0.1 (DNS rebinding)."""


def allowed_hosts(listen_host: str) -> list[str]:
    """The Host headers ``gpuplan web --host listen_host`` answers: the loopback names and that host;
    any on a wildcard address (0.0.0.0, ::), which serves every name the machine has."""
    if listen_host in ("0.0.0.0", "::", ""):
        return ["*"]
    return list(dict.fromkeys([*LOOPBACK_HOSTS, listen_host]))


def create_app(catalog: Catalog | None = None, *, hosts: Sequence[str] | None = None) -> FastAPI:
    """The web app over ``catalog`` (default: the bundled one); ``hosts``: the Host headers it answers
    (None: any, for an app embedded or under test; ``serve`` passes ``allowed_hosts``)."""
    app = FastAPI(
        title="gpuplan",
        version=__version__,
        description="Which GPU, how many, at what cost. The JSON API mirrors the CLI's --format json.",
        default_response_class=FiniteJSONResponse,
        docs_url=None,
        redoc_url=None,
    )
    app.state.catalog = catalog or load_catalog()
    install_error_handlers(app)
    app.include_router(router)

    @app.get("/", include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse((STATIC_DIR / "index.html").read_text(encoding="utf-8"))

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly_bundle() -> object:
        path = plotly_js()
        if path is None:
            return error_response(404, "plotly is not installed on the server (pip install 'gpuplan[plot]')")
        return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    _install_docs(app)  # mounted before /static, which would otherwise answer /static/apidocs/*
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)
    if hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))
    install_health_and_metrics(app)  # its middleware last, outermost: a refused Host header counts too
    return app


def serve(catalog: Callable[[], Catalog], host: str, port: int, *, on_start: Callable[[], None]) -> None:
    """Serve the app with uvicorn until Ctrl-C: import uvicorn (its ImportError, when it is not installed,
    comes first, before ``on_start``), call ``on_start`` (the CLI's banner), build the app over
    ``catalog()`` and run it on ``host``:``port``, logging warnings only."""
    import uvicorn

    on_start()
    uvicorn.run(create_app(catalog(), hosts=allowed_hosts(host)), host=host, port=port, log_level="warning")

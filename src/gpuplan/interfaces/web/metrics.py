"""``/health`` and ``/metrics``: liveness for a load balancer, Prometheus metrics for a scraper.

``/health`` answers ``{"status": "ok", "version": ...}`` without touching the catalog or forking.
``/metrics`` is the Prometheus text format (``prometheus_client``, in the ``web`` extra): requests by
endpoint (the route's path template, so the label set stays bounded; ``unmatched`` for a path no route
answers; a request refused before routing, e.g. for its Host header, counts under the route it named),
method and status; the latency histogram by endpoint; the requests in flight. The counting is
an ASGI middleware in the server process: an API request's computation runs in a forked child
(:mod:`gpuplan.interfaces.web.isolated`), whose own counters would never reach the parent, but the
request itself starts and ends here. Each app has its own registry, so two apps (tests) never share counts.
Without ``prometheus_client`` the app still serves, and ``/metrics`` answers 404 with the install hint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuplan import __version__
from gpuplan.interfaces.web.errors import error_response

try:
    import prometheus_client
except ModuleNotFoundError:  # the web extra installs it; an app without it serves all but /metrics
    prometheus_client = None  # type: ignore[assignment]

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Histogram bucket bounds: prometheus_client's defaults up to 10 s
(https://github.com/prometheus/client_python/blob/master/prometheus_client/metrics.py, ``Histogram.DEFAULT_BUCKETS``)
plus the API's 30 s compute limit (``api.TIME_LIMIT_S``) and one above it, so a request cut at the limit
lands in its own bucket (bucket choice: https://prometheus.io/docs/practices/histograms/)."""
UNMATCHED = "unmatched"
"""The endpoint label of a request for a path that no route answers (a 404)."""
METRICS_HINT = "prometheus_client is not installed on the server (pip install 'gpuplan[web]')"


HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The methods counted by name (RFC 9110 §9 and PATCH, RFC 5789); any other is counted as OTHER_METHOD,
so a client cannot grow the label set."""
OTHER_METHOD = "other"


class Health(BaseModel):
    """The answer of ``GET /health``."""

    status: str
    version: str


def endpoint_label(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The path template (``/api/fit``, ``/static`` for a mount) of the first of ``routes`` that
    answers ``scope`` (fully, or for another method), else :data:`UNMATCHED`. A route without a
    ``path`` (an included router) is skipped: its routes record themselves in ``scope["route"]``."""
    for route in routes:
        path = getattr(route, "path", None)
        if isinstance(path, str) and route.matches(dict(scope))[0] is not Match.NONE:
            return path
    return UNMATCHED


class RequestMetrics:
    """ASGI middleware counting every HTTP request into its own ``CollectorRegistry``."""

    def __init__(self, app: ASGIApp, registry: Any, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes
        labels = ("endpoint", "method", "status")
        self.requests = prometheus_client.Counter(
            "gpuplan_http_requests", "HTTP requests answered", labels, registry=registry
        )
        self.latency = prometheus_client.Histogram(
            "gpuplan_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer",
            ("endpoint", "method"),
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.in_flight = prometheus_client.Gauge(
            "gpuplan_http_requests_in_flight", "HTTP requests being answered now", registry=registry
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]  # an app that raises before answering is a 500 (ServerErrorMiddleware's answer)

        async def record_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        top_level = endpoint_label(scope, self.routes())
        started_s = time.perf_counter()
        self.in_flight.inc()
        try:
            await self.app(scope, receive, record_status)
        finally:
            self.in_flight.dec()
            route_path = getattr(scope.get("route"), "path", None)  # set by the router as it dispatched
            endpoint = route_path if isinstance(route_path, str) and route_path else top_level
            method = str(scope.get("method", ""))
            method = method if method in HTTP_METHODS else OTHER_METHOD  # a client cannot add series
            self.latency.labels(endpoint, method).observe(time.perf_counter() - started_s)
            self.requests.labels(endpoint, method, str(status[0])).inc()


def install_health_and_metrics(app: FastAPI) -> None:
    """Add ``/health``, and ``/metrics`` with its counting middleware (outermost, so every answer counts)."""

    @app.get("/health", response_model=Health, summary="liveness: status and version, no computation")
    def health() -> Health:
        return Health(status="ok", version=__version__)

    if prometheus_client is None:

        @app.get("/metrics", include_in_schema=False)
        def no_metrics() -> Response:
            return error_response(404, METRICS_HINT)

        return
    registry = prometheus_client.CollectorRegistry()

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(
            prometheus_client.generate_latest(registry), media_type=prometheus_client.CONTENT_TYPE_LATEST
        )

    app.add_middleware(RequestMetrics, registry=registry, routes=lambda: app.routes)

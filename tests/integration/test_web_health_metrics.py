"""``/health`` answers cheaply; ``/metrics`` counts what the server answered, read back with
prometheus_client's own text parser (the format a Prometheus server scrapes)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("prometheus_client", reason="prometheus_client (gpuplan[web]) is needed")

from fastapi.testclient import TestClient
from prometheus_client import parser

from gpuplan import __version__
from gpuplan.interfaces.web import metrics
from gpuplan.interfaces.web.app import allowed_hosts, create_app
from gpuplan.interfaces.web.metrics import LATENCY_BUCKETS_S, METRICS_HINT, UNMATCHED

FIT = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM"}


def _samples(client: TestClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in parser.text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def _count(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], **labels: str) -> float:
    return samples.get(("gpuplan_http_requests_total", frozenset(labels.items())), 0.0)


def test_health_is_ok_with_the_version_and_fast() -> None:
    client = TestClient(create_app())
    started_s = time.perf_counter()
    answer = client.get("/health")
    elapsed_s = time.perf_counter() - started_s
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "version": __version__}
    assert elapsed_s < 0.5  # no catalog read, no fork: a TestClient round trip is ~1 ms


def test_metrics_count_requests_by_route_template_method_and_status() -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    for _ in range(3):
        assert client.get("/health").status_code == 200
    assert client.post("/api/fit", json=FIT).status_code == 200  # computed in a forked child
    assert client.post("/api/fit", json={**FIT, "gpu": "NO-SUCH-GPU"}).status_code == 404
    assert client.get("/no/such/page").status_code == 404
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    samples = _samples(client)
    assert _count(samples, endpoint="/health", method="GET", status="200") == 3
    assert _count(samples, endpoint="/api/fit", method="POST", status="200") == 1
    assert _count(samples, endpoint="/api/fit", method="POST", status="404") == 1
    assert _count(samples, endpoint=UNMATCHED, method="GET", status="404") == 1
    assert _count(samples, endpoint="/static", method="GET", status="200") == 1  # the mount's path
    assert _count(samples, endpoint="/openapi.json", method="GET", status="200") == 1
    endpoints = {
        dict(labels).get("endpoint") for name, labels in samples if name == "gpuplan_http_requests_total"
    }
    assert "/no/such/page" not in endpoints and "/static/app.js" not in endpoints  # bounded label set
    # the scrape in flight is the only request being answered while /metrics renders
    assert samples[("gpuplan_http_requests_in_flight", frozenset())] == 1


def test_the_latency_histogram_holds_every_request_in_its_buckets() -> None:
    client = TestClient(create_app())
    for _ in range(4):
        client.get("/health")
    samples = _samples(client)
    labels = {("endpoint", "/health"), ("method", "GET")}
    count = samples[("gpuplan_http_request_duration_seconds_count", frozenset(labels))]
    total_s = samples[("gpuplan_http_request_duration_seconds_sum", frozenset(labels))]
    assert count == 4 and 0 < total_s < 4 * 0.5
    cumulative = [
        samples[("gpuplan_http_request_duration_seconds_bucket", frozenset({*labels, ("le", le)}))]
        for le in [*(str(bound) for bound in LATENCY_BUCKETS_S), "+Inf"]
    ]
    assert cumulative == sorted(cumulative) and cumulative[-1] == 4


def test_a_refused_host_header_is_counted_as_a_400_of_its_route() -> None:
    client = TestClient(create_app(hosts=allowed_hosts("127.0.0.1")), base_url="http://127.0.0.1")
    assert client.get("/health", headers={"host": "evil.example"}).status_code == 400
    assert _count(_samples(client), endpoint="/health", method="GET", status="400") == 1


def test_two_apps_keep_their_own_counts() -> None:
    first, second = TestClient(create_app()), TestClient(create_app())
    first.get("/health")
    assert _count(_samples(second), endpoint="/health", method="GET", status="200") == 0


def test_without_prometheus_client_metrics_is_a_404_with_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "prometheus_client", None)
    client = TestClient(create_app())
    assert client.get("/health").status_code == 200
    answer = client.get("/metrics")
    assert answer.status_code == 404 and answer.json()["error"] == METRICS_HINT


def test_a_made_up_method_does_not_add_a_series() -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    for method in ("FOO1", "FOO2", "BREW"):
        client.request(method, "/no/such/page")
    samples = _samples(client)
    methods = {
        dict(labels).get("method") for name, labels in samples if name == "gpuplan_http_requests_total"
    }
    assert methods <= set(metrics.HTTP_METHODS) | {metrics.OTHER_METHOD}
    assert (
        sum(
            v
            for (name, labels), v in samples.items()
            if name == "gpuplan_http_requests_total" and dict(labels).get("method") == metrics.OTHER_METHOD
        )
        == 3
    )

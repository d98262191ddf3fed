"""Issue 22: the web accepted any ``Host`` header (a loopback server reachable by DNS rebinding) and
its OpenAPI schema documented only 200/422 though the API answers 400/404/405/413/500 too."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gpuplan.interfaces.web.app import allowed_hosts, create_app


@pytest.mark.parametrize(
    ("host", "status"), [("127.0.0.1:8000", 200), ("localhost", 200), ("evil.example", 400)]
)
def test_a_loopback_server_answers_only_loopback_names(host: str, status: int) -> None:
    client = TestClient(create_app(hosts=allowed_hosts("127.0.0.1")), base_url="http://127.0.0.1")
    assert client.get("/api/gpus", headers={"host": host}).status_code == status


def test_a_wildcard_listener_answers_every_name() -> None:
    assert allowed_hosts("0.0.0.0") == ["*"]
    assert "10.0.0.5" in allowed_hosts("10.0.0.5") and "localhost" in allowed_hosts("10.0.0.5")


def test_the_schema_documents_every_error_status() -> None:
    schema = TestClient(create_app()).get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        if not path.startswith("/api/"):
            continue
        for operation in operations.values():
            codes = set(operation["responses"])
            assert {"200", "400", "404", "413", "422", "500"} <= codes, (path, codes)
            assert operation["responses"]["404"]["content"]["application/json"]["schema"]["$ref"].endswith(
                "ApiError"
            )

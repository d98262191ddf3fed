"""An unknown HF id fails fast with the hint that fits: one existence request, never the Hub client's
retry loop (1+2+4+8+8 s with no network), and no "pip install" when huggingface_hub is installed.

huggingface_hub is replaced by a fake module and the network by httpx's MockTransport: no test here
reaches a network."""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gpuplan.adapters.models import hub, registry
from gpuplan.core.errors import UnknownNameError

Handler = Callable[[httpx.Request], httpx.Response]
REAL_HUB_LOOKUP = registry._hub_config
"""The registry's Hub lookup as shipped: every other test runs with it stubbed out (tests/conftest.py)."""


@pytest.fixture()
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A fake huggingface_hub whose cache is empty and whose download fails; records each call's
    ``local_files_only``."""
    calls: list[bool] = []

    def download(repo_id: str, filename: str, *, local_files_only: bool) -> str:
        calls.append(local_files_only)
        raise RuntimeError("not cached" if local_files_only else "download refused")

    module = types.ModuleType("huggingface_hub")
    module.hf_hub_download = download  # type: ignore[attr-defined]
    module.get_token = lambda: "hf_secret"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    monkeypatch.setattr(registry, "_hub_config", REAL_HUB_LOOKUP)  # these tests are of that lookup
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return calls


def _network(monkeypatch: pytest.MonkeyPatch, handler: Handler) -> list[httpx.Request]:
    """Every httpx.Client the probe opens goes through ``handler``; returns the requests seen."""
    seen: list[httpx.Request] = []
    real_client = httpx.Client

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    def client(**kwargs: Any) -> httpx.Client:
        return real_client(transport=httpx.MockTransport(record), **kwargs)

    monkeypatch.setattr(httpx, "Client", client)
    return seen


def _unknown(name: str) -> tuple[str, float]:
    started_s = time.perf_counter()
    with pytest.raises(UnknownNameError) as info:
        registry.get_model(name)
    return str(info.value), time.perf_counter() - started_s


def test_no_network_fails_after_one_request_with_the_offline_hint(
    monkeypatch: pytest.MonkeyPatch, downloads: list[bool]
) -> None:
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    seen = _network(monkeypatch, unreachable)
    message, elapsed_s = _unknown("some-org/does-not-exist")
    assert len(seen) == 1  # one request, no retry
    assert downloads == [True]  # the local cache only: hf_hub_download's retry loop never starts
    assert elapsed_s < 1.0
    assert "could not be reached" in message and "HF_HUB_OFFLINE" in message
    assert "pip install" not in message  # huggingface_hub is installed


def test_a_missing_repository_says_check_the_id(
    monkeypatch: pytest.MonkeyPatch, downloads: list[bool]
) -> None:
    seen = _network(monkeypatch, lambda _request: httpx.Response(404, json={"error": "Repository not found"}))
    message, _ = _unknown("some-org/does-not-exist")
    assert downloads == [True]
    assert seen[0].url == "https://huggingface.co/api/models/some-org/does-not-exist"
    assert seen[0].headers["authorization"] == "Bearer hf_secret"  # a private repo the user may read
    assert "no model 'some-org/does-not-exist' on huggingface.co" in message and "check the id" in message


def test_a_server_error_is_reported_with_its_status(
    monkeypatch: pytest.MonkeyPatch, downloads: list[bool]
) -> None:
    _network(monkeypatch, lambda _request: httpx.Response(503))
    message, _ = _unknown("some-org/model")
    assert "HTTP 503" in message and downloads == [True]


def test_offline_mode_asks_no_server(monkeypatch: pytest.MonkeyPatch, downloads: list[bool]) -> None:
    seen = _network(monkeypatch, lambda _request: httpx.Response(200))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message, _ = _unknown("some-org/model")
    assert seen == [] and downloads == [True]
    assert "HF_HUB_OFFLINE is set" in message


def test_an_existing_repository_is_downloaded_once_and_a_refusal_is_named(
    monkeypatch: pytest.MonkeyPatch, downloads: list[bool]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.example/")
    seen = _network(monkeypatch, lambda _request: httpx.Response(200, json={"id": "org/gated"}))
    message, _ = _unknown("org/gated")
    assert str(seen[0].url) == "https://hf-mirror.example/api/models/org/gated"
    assert downloads == [True, False]
    assert "RuntimeError" in message and "hf auth login" in message


def test_the_probe_bounds_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    timeouts: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"])
        return httpx.Response(200)

    _network(monkeypatch, handler)
    assert hub.probe_status("org/model", None) == 200
    assert set(timeouts[0].values()) == {hub.PROBE_TIMEOUT_S}

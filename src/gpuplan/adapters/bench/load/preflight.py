"""The check before a load test: is anything listening at the endpoint's URL?"""

from __future__ import annotations

import httpx

from gpuplan.core.errors import BenchmarkError
from gpuplan.core.redact import redact

PREFLIGHT_TIMEOUT_S = 5.0
"""How long the one ``GET /v1/models`` may take before the endpoint counts as unreachable."""


def check_reachable(url: str) -> None:
    """Fail fast, with one clear line, when nothing listens at ``url`` (any HTTP answer will do: only a
    transport error fails; proxies from the environment are not used)."""
    try:
        httpx.get(url.rstrip("/") + "/v1/models", timeout=PREFLIGHT_TIMEOUT_S, trust_env=False)
    except httpx.HTTPError as exc:
        raise BenchmarkError(
            redact(f"cannot reach {url}: {type(exc).__name__}: {exc}"),
            hint="is the server running? try gpuplan mock-server --port 8000",
        ) from None

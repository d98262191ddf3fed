"""The check before a load test: one ``GET /v1/models`` with the run's headers, then (only when needed) one
probe request, so a wrong URL, key or model fails in one line before any load is sent.

- nothing answers: :class:`BenchmarkError` (exit 4), "cannot reach";
- HTTP 401/403: the key is missing or wrong: :class:`UserInputError` naming ``--api-key``;
- HTTP 200 with a model list that holds ``--model``: go;
- a list without ``--model``: one probe request (``max_tokens`` 1, not streamed); a 4xx answer (other
  than 408/429) fails naming ``--model`` and the models the server lists; any other answer goes on
  (some servers, TGI among them, list one id and accept any name);
- any other answer to ``/v1/models`` (404: the server has no model list): go, unchecked.
"""

from __future__ import annotations

from typing import Any

import httpx

from gpuplan.adapters.bench.load.body import request_body
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.core import jsontext
from gpuplan.core.errors import BenchmarkError, UserInputError
from gpuplan.core.redact import mask_secrets, redact

PREFLIGHT_TIMEOUT_S = 5.0
"""How long the one ``GET /v1/models`` may take before the endpoint counts as unreachable."""
PROBE_TIMEOUT_S = 30.0
"""How long the probe request (one token) may take: a cold server can be slow to answer its first."""
AUTH_STATUSES = (401, 403)
RETRYABLE_4XX = (408, 429)
"""4xx answers that say "later", not "wrong": a probe answered so does not fail the model check."""


def check_endpoint(config: LoadConfig) -> list[dict[str, Any]] | None:
    """Reachable, the key accepted and the model served, else one line saying which flag to fix; returns
    the model cards the server listed (None: it has no model list)."""
    response = _get_models(config.url, config.http_headers(), config.secrets())
    if response.status_code in AUTH_STATUSES:
        raise UserInputError(
            f"{redact(config.url)} refused the request with HTTP {response.status_code}: the API key is "
            + ("wrong" if config.api_key or config.headers else "missing"),
            hint="give the server's key with --api-key (or OPENAI_API_KEY)",
        )
    cards = _model_cards(response)
    served = None if cards is None else [str(card["id"]) for card in cards]
    if served is None or config.model in served:
        return cards
    _probe(config, served)
    return cards


def _get_models(url: str, headers: dict[str, str], secrets: tuple[str, ...]) -> httpx.Response:
    """``GET URL/v1/models``; proxies from the environment are not used."""
    try:
        return httpx.get(
            url.rstrip("/") + "/v1/models", headers=headers, timeout=PREFLIGHT_TIMEOUT_S, trust_env=False
        )
    except httpx.HTTPError as exc:
        raise BenchmarkError(
            mask_secrets(f"cannot reach {url}: {type(exc).__name__}: {exc}", secrets),
            hint="is the server running? try gpuplan mock-server --port 8000",
        ) from None


def _model_cards(response: httpx.Response) -> list[dict[str, Any]] | None:
    """The cards of an OpenAI model list (``{"data": [{"id": ...}]}``), or None when it is not one."""
    if response.status_code != 200:
        return None
    try:
        data: Any = jsontext.loads(response.content)
    except ValueError:
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [item for item in items if isinstance(item, dict) and "id" in item]


def _probe(config: LoadConfig, served: list[str]) -> None:
    """One request with ``--model``; a refusal (4xx) fails before any load is sent."""
    body = jsontext.loads(request_body(config, "hello", 1)) | {"stream": False}
    body.pop("stream_options", None)
    try:
        response = httpx.post(
            config.endpoint,
            json=body,
            headers=config.http_headers(),
            timeout=PROBE_TIMEOUT_S,
            trust_env=False,
        )
    except httpx.HTTPError:
        return  # the load itself will record what goes wrong
    status = response.status_code
    if 400 <= status < 500 and status not in RETRYABLE_4XX:
        said = mask_secrets(" ".join(response.text.split())[:160], config.secrets())
        listed = ", ".join(served[:10]) + (f" (+{len(served) - 10} more)" if len(served) > 10 else "")
        raise UserInputError(
            f"--model {config.model!r} is not served by {redact(config.url)} (it lists: {listed or 'nothing'}); "
            f"a one-token probe got HTTP {status}: {said}",
            hint="pass one of the listed names with --model",
        )

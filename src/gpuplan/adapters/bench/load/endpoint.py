"""What stands behind the endpoint, recorded with a run: the model card of ``GET /v1/models`` and the
engine, read from the server (or given by the user), so a stored run says what it measured.

- model card (vLLM's ``ModelCard``, vllm/entrypoints/openai/protocol.py): ``id``, ``owned_by``
  (``vllm`` for vLLM), ``root`` (the weights' path or HF id) and ``max_model_len``;
- engine: the prefix of the server's Prometheus metric names (``vllm:`` for vLLM
  (https://docs.vllm.ai/en/latest/usage/metrics.html), ``sglang:`` for SGLang
  (https://docs.sglang.ai/references/production_metrics.html), ``tgi_`` for TGI), else ``owned_by``;
- engine version: vLLM's ``GET /version`` (``{"version": "0.11.0"}``), when the server answers it.

The user's ``--gpu``, ``--engine``, ``--engine-version`` and ``--tp`` win over what is read (the GPU
cannot be read from an OpenAI-compatible server at all). Nothing here fails a run: a server that answers
none of it leaves the fields out.
"""

from __future__ import annotations

from typing import Any

import httpx

from gpuplan.adapters.bench.load import metrics
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.core import jsontext

ENGINE_PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi"}
"""Metric-name prefix of each engine (the prefixes :mod:`metrics` keeps)."""
OWNERS = {"vllm": "vllm", "sglang": "sglang"}
"""``owned_by`` values that name the engine (vLLM's model card says ``vllm``; SGLang's ``sglang``)."""
INFO_TIMEOUT_S = 5.0
CARD_FIELDS = ("id", "owned_by", "root", "max_model_len")


def model_card(cards: list[dict[str, Any]] | None, model: str) -> dict[str, Any]:
    """The card of ``model`` in a ``/v1/models`` list (its fields in ``CARD_FIELDS``), or {}."""
    for card in cards or ():
        if card.get("id") == model:
            return {k: card[k] for k in CARD_FIELDS if card.get(k) is not None}
    return {}


def engine_of(samples: dict[str, float], owned_by: str | None) -> tuple[str | None, str | None]:
    """(engine, how it was read) from the metric names, else from ``owned_by``."""
    for prefix, engine in ENGINE_PREFIXES.items():
        if any(key.startswith(prefix) for key in samples):
            return engine, f"/metrics ({prefix} names)"
    if owned_by is not None and owned_by.lower() in OWNERS:
        return OWNERS[owned_by.lower()], "/v1/models owned_by"
    return None, None


def _version(url: str, headers: dict[str, str]) -> str | None:
    try:
        response = httpx.get(
            url.rstrip("/") + "/version", headers=headers, timeout=INFO_TIMEOUT_S, trust_env=False
        )
        data = jsontext.loads(response.content) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) and version else None


def server_info(config: LoadConfig, cards: list[dict[str, Any]] | None) -> dict[str, Any]:
    """What the server says about itself: its model card, engine (and how it was read), engine version."""
    card = model_card(cards, config.model)
    scraped = metrics.scrape(config.metrics_url or config.url.rstrip("/") + "/metrics", INFO_TIMEOUT_S)
    engine, source = engine_of(scraped.get("samples", {}), card.get("owned_by"))
    version = _version(config.url, config.http_headers()) if engine == "vllm" else None
    info: dict[str, Any] = {"model_card": card, "engine": engine, "engine_source": source}
    return info | ({"engine_version": version} if version else {})


def deployment(config: LoadConfig, server: dict[str, Any]) -> dict[str, Any]:
    """The run's deployment as ``gpuplan calibrate --from-store`` reads it: the flags, else what the server
    said; only the fields known (a missing one never hides a ``calibrate`` flag)."""
    found = {
        "gpu": config.gpu,
        "engine": config.engine or server.get("engine"),
        "engine_version": config.engine_version or server.get("engine_version"),
        "tp": config.tp,
        "num_gpus": config.tp,
        "model": config.model,
        "max_model_len": server.get("model_card", {}).get("max_model_len"),
    }
    return {k: v for k, v in found.items() if v is not None}

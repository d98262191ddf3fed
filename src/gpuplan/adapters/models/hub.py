"""The Hugging Face Hub lookup behind :func:`gpuplan.adapters.models.registry.get_model`: fast to fail.

``huggingface_hub`` retries a request that hits a network error with exponential backoff (1, 2, 4, 8,
8 s: ``http_backoff``, https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/utils/_http.py),
so with no network an unknown id took ~25-30 s to fail. Here, after the local HF cache, ONE request
without retries (:data:`PROBE_TIMEOUT_S`) asks the Hub's model API whether the repository exists;
only when it answers 200 is ``hf_hub_download`` called. Every miss is a :class:`HubMiss` whose message
is the hint: unreachable Hub, no such (public) repository, ``HF_HUB_OFFLINE`` set, or a download
error. ``huggingface_hub`` is optional (extra ``gpuplan[hf]``): without it the lookup is skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 5.0
"""Limit of the one existence request: half of huggingface_hub's own HEAD timeout
(``DEFAULT_ETAG_TIMEOUT = 10``,
https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/constants.py)."""
DEFAULT_ENDPOINT = "https://huggingface.co"
"""The Hub, unless ``HF_ENDPOINT`` names a mirror (as huggingface_hub reads it)."""
MODEL_API = "{endpoint}/api/models/{repo_id}"
"""The Hub's model-info route (https://huggingface.co/docs/hub/api#get-apimodelsrepoid)."""
PATH_HINT = "pass a path to config.json"
_TRUE = {"1", "on", "yes", "true"}


class HubMiss(Exception):
    """The Hub lookup found nothing; ``str(exc)`` is the hint for the user."""


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, as huggingface_hub reads it."""
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return flag.strip().lower() in _TRUE


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _host() -> str:
    return endpoint().removeprefix("https://").removeprefix("http://")


def probe_status(repo_id: str, token: str | None) -> int:
    """HTTP status of the Hub's model API for ``repo_id``: one request, no retries (raises
    ``httpx.HTTPError`` when the Hub cannot be reached)."""
    import httpx  # a core dependency, imported only when the Hub is asked

    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = MODEL_API.format(endpoint=endpoint(), repo_id=repo_id)
    with httpx.Client(timeout=PROBE_TIMEOUT_S, follow_redirects=True) as client:
        return client.get(url, headers=headers).status_code


def _token(hub: Any) -> str | None:
    get_token = getattr(hub, "get_token", None)
    try:
        token = get_token() if callable(get_token) else None
    except Exception:  # a broken token file is no token
        return None
    return token if isinstance(token, str) and token else None


def _check_exists(repo_id: str, hub: Any) -> None:
    """Raise HubMiss unless the Hub answers 200 for ``repo_id``."""
    import httpx

    host = _host()
    try:
        status = probe_status(repo_id, _token(hub))
    except httpx.HTTPError as exc:
        raise HubMiss(
            f"{host} could not be reached ({type(exc).__name__}; offline?): {PATH_HINT}, or set "
            "HF_HUB_OFFLINE=1 to use only the local HF cache"
        ) from None
    if status in (401, 403, 404):
        raise HubMiss(
            f"no model {repo_id!r} on {host} that this machine may read: check the id, or {PATH_HINT} "
            "(a gated or private model needs `hf auth login`)"
        )
    if status != 200:
        raise HubMiss(f"{host} answered HTTP {status} for {repo_id!r}: {PATH_HINT}, or retry later")


def config_path(repo_id: str) -> Path | None:
    """The local path of ``repo_id``'s config.json (HF cache, else downloaded), None without
    huggingface_hub; raises :class:`HubMiss` with the hint when it cannot be had."""
    try:
        import huggingface_hub as hub
    except ImportError:
        return None
    try:
        return Path(str(hub.hf_hub_download(repo_id, "config.json", local_files_only=True)))
    except Exception:  # not cached: ask the Hub
        pass
    if offline():
        raise HubMiss(f"{repo_id!r} is not in the local HF cache and HF_HUB_OFFLINE is set: {PATH_HINT}")
    _check_exists(repo_id, hub)
    try:
        return Path(str(hub.hf_hub_download(repo_id, "config.json", local_files_only=False)))
    except Exception as exc:  # gated, no config.json, network lost since the probe
        raise HubMiss(
            f"{repo_id!r} is on {_host()} but its config.json could not be downloaded ({type(exc).__name__}): "
            f"{PATH_HINT} (a gated model needs `hf auth login`)"
        ) from None

"""The JSON body of one request (the load and the preflight probe send the same one)."""

from __future__ import annotations

import json
from typing import Any

from gpuplan.adapters.bench.load.config import LoadConfig


def request_body(config: LoadConfig, prompt: str, output_tokens: int | None = None) -> bytes:
    """The JSON body of one request: model, prompt, ``max_tokens``, streaming with usage, the sampling
    parameters (``top_p``/``top_k`` only when given), then ``--extra-body`` merged over all of it.

    ``ignore_eos`` (a vLLM/SGLang extension) is sent only when on, as ``vllm bench serve`` does: a
    strict server refuses fields it does not know (``transformers serve``: 422 "Unexpected fields in
    the request: {'ignore_eos'}"), so ``--no-ignore-eos`` leaves it out rather than sending false."""
    body: dict[str, Any] = {
        "model": config.model,
        "max_tokens": output_tokens or config.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": config.temperature,
    }
    if config.ignore_eos:
        body["ignore_eos"] = True
    if config.top_p is not None:
        body["top_p"] = config.top_p
    if config.top_k is not None:
        body["top_k"] = config.top_k
    if config.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return json.dumps(body | config.extra_body).encode()

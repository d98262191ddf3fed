"""The JSON the mock answers with, shaped as vLLM's: token chunks, the model list, the prompt it reads."""

from __future__ import annotations

import time
from typing import Any

from gpuplan.adapters.bench.mock.config import MockConfig


def model_list(config: MockConfig) -> dict[str, Any]:
    """``GET /v1/models``: vLLM's model card (``id``, ``owned_by``, ``root``, ``max_model_len``) per name."""
    names = config.served_model_names or ("mock",)
    cards = [
        {"id": n, "object": "model", "owned_by": "gpuplan", "root": n, "max_model_len": config.max_model_len}
        for n in names
    ]
    return {"object": "list", "data": cards}


def prompt_text(api: str, body: dict[str, Any]) -> str:
    if api == "chat":
        messages = body.get("messages") or []
        return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    prompt = body.get("prompt", "")
    return " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)


def token_payload(api: str, ident: str, model: str, finish: str | None) -> dict[str, Any]:
    if api == "completions":
        choice: dict[str, Any] = {
            "index": 0,
            "text": "" if finish else " the",
            "logprobs": None,
            "finish_reason": finish,
        }
        obj = "text_completion"
    else:
        delta = {} if finish else {"role": "assistant", "content": " the"}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = "chat.completion.chunk"
    return {"id": ident, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}

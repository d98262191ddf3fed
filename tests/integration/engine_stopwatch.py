"""``transformers serve`` (Hugging Face's OpenAI-compatible server) with a stopwatch inside its process.

Run as ``python engine_stopwatch.py MODEL_DIR --host 127.0.0.1 --port P ...`` (the arguments of
``transformers serve``) by ``test_real_engine.py``. The server is transformers' own: its FastAPI app,
tokenizer, ``generate`` loop in its engine process, SSE and ``usage``; only its ``build_server`` is
wrapped so that the app also gets:

- an ASGI middleware that times every ``/v1/*`` request *inside the server*: arrival (the app is
  called) and the moment each SSE event carrying text is handed on towards uvicorn's transport (its
  ``send`` is called); it reads the ``usage`` the server itself sent;
- ``GET /stopwatch``: those per-request records as JSON (exact times, for the test's comparisons);
- ``GET /stopwatch/metrics``: the same as Prometheus histograms and counters under vLLM's names and
  buckets (``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
  ``vllm:e2e_request_latency_seconds``, ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
  ``vllm:request_success_total``, ``vllm:num_requests_running``; https://docs.vllm.ai/en/latest/usage/
  metrics.html), because ``transformers serve`` exposes no ``/metrics`` of its own. A client that reads
  vLLM's metrics reads these the same way (and takes the engine for vLLM from their names).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
E2E_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)
"""vLLM's buckets (vllm/v1/metrics/loggers.py), cut where this test's latencies can never reach."""


class Stopwatch:
    """Per-request server-side times and the vLLM-named metrics built from them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.registry = CollectorRegistry()
        label = ["model_name"]
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "TTFT", label, buckets=TTFT_BUCKETS_S, registry=self.registry
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "ITL", label, buckets=ITL_BUCKETS_S, registry=self.registry
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "E2E", label, buckets=E2E_BUCKETS_S, registry=self.registry
        )
        self.prompt = Counter("vllm:prompt_tokens", "prompt tokens", label, registry=self.registry)
        self.generation = Counter("vllm:generation_tokens", "generated tokens", label, registry=self.registry)
        self.success = Counter(
            "vllm:request_success",
            "finished requests",
            ["model_name", "finished_reason"],
            registry=self.registry,
        )
        self.running = Gauge("vllm:num_requests_running", "requests in flight", label, registry=self.registry)

    def finish(self, record: dict[str, Any]) -> None:
        model = str(record.get("model") or "")
        times = record["token_times_s"]
        if times:
            self.ttft.labels(model).observe(times[0] - record["arrival_s"])
            for a, b in itertools.pairwise(times):
                self.itl.labels(model).observe(b - a)
            self.e2e.labels(model).observe(record["done_s"] - record["arrival_s"])
        usage = record.get("usage") or {}
        self.prompt.labels(model).inc(usage.get("prompt_tokens", 0))
        self.generation.labels(model).inc(usage.get("completion_tokens", 0))
        if record.get("finish_reason"):
            self.success.labels(model, record["finish_reason"]).inc()
        with self.lock:
            self.records.append(record)


def _events(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of the ``data:`` lines in one chunk of an SSE body."""
    out = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("data: ") and line[6:].strip() not in ("", "[DONE]"):
            try:
                out.append(json.loads(line[6:]))
            except ValueError:
                continue
    return out


def _note(record: dict[str, Any], event: dict[str, Any], now: float) -> bool:
    """Record what one event says; True when it carries generated text."""
    record["model"] = event.get("model", record.get("model"))
    if event.get("usage"):
        record["usage"] = event["usage"]
    carried = False
    for choice in event.get("choices") or ():
        if choice.get("finish_reason"):
            record["finish_reason"] = choice["finish_reason"]
        text = choice.get("text") or (choice.get("delta") or {}).get("content")
        carried = carried or bool(text)
    return carried


def timed(app: App, watch: Stopwatch) -> App:
    """``app`` with the stopwatch around every ``/v1/`` POST and its two read-out routes."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path in ("/stopwatch", "/stopwatch/metrics"):
            return await _read_out(watch, path, send)
        if scope["type"] != "http" or not path.startswith("/v1/") or scope.get("method") != "POST":
            return await app(scope, receive, send)
        record: dict[str, Any] = {"path": path, "arrival_s": time.monotonic(), "token_times_s": []}
        watch.running.labels("").inc()

        async def timed_send(message: Message) -> None:
            now = time.monotonic()  # the server hands the event over (parsed after it is sent)
            await send(message)
            if message["type"] == "http.response.start":
                record["status"] = message["status"]
            elif message["type"] == "http.response.body":
                if any([_note(record, e, now) for e in _events(message.get("body", b""))]):
                    record["token_times_s"].append(now)
                if not message.get("more_body", False):
                    record["done_s"] = now

        try:
            await app(scope, receive, timed_send)
        finally:
            watch.running.labels("").dec()
            record.setdefault("done_s", time.monotonic())
            watch.finish(record)

    return wrapped


async def _read_out(watch: Stopwatch, path: str, send: Send) -> None:
    if path == "/stopwatch":
        with watch.lock:
            body, kind = json.dumps(watch.records).encode(), b"application/json"
    else:
        body, kind = generate_latest(watch.registry), b"text/plain; version=0.0.4"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    from transformers.cli.serving import server  # type: ignore[import-not-found, unused-ignore]
    from transformers.cli.transformers import main as transformers_main  # type: ignore[import-not-found, unused-ignore]

    watch = Stopwatch()
    build = server.build_server

    def build_timed(*args: Any, **kwargs: Any) -> Any:
        app = build(*args, **kwargs)
        app.add_middleware(lambda inner: timed(inner, watch))
        return app

    server.build_server = build_timed
    sys.argv = ["transformers", "serve", *sys.argv[1:]]
    transformers_main()  # type: ignore[no-untyped-call, unused-ignore]


if __name__ == "__main__":
    main()

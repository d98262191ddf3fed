"""``gpuplan mock-server``: a mock OpenAI-compatible server with set latencies and faults (docs/bench.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gpuplan.interfaces.cli.app import app, check_listen_address, guarded


@app.command("mock-server")
@guarded
def mock_server(
    host: Annotated[
        str, typer.Option(help="address to bind (keep 127.0.0.1 unless you mean it)")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one (printed)")] = 8000,
    ttft_ms: Annotated[float, typer.Option(help="time to first token after admission")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="gap between tokens")] = 10.0,
    max_concurrency: Annotated[int, typer.Option(help="streams served at once; more queue")] = 1024,
    error_500_rate: Annotated[float, typer.Option(help="share of requests answered HTTP 500")] = 0.0,
    error_429_rate: Annotated[float, typer.Option(help="share answered HTTP 429")] = 0.0,
    drop_rate: Annotated[float, typer.Option(help="share whose connection drops mid-stream")] = 0.0,
    malformed_rate: Annotated[float, typer.Option(help="share with a malformed SSE event")] = 0.0,
    slow_rate: Annotated[float, typer.Option(help="share whose first byte is held back")] = 0.0,
    slow_first_byte_ms: Annotated[float, typer.Option(help="hold-back of the slow ones")] = 0.0,
    seed: Annotated[int, typer.Option(help="seed of the fault draw")] = 0,
    retry_after_s: Annotated[int | None, typer.Option(help="Retry-After (s) of the 429 answers")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="like vllm serve --api-key: /v1/* needs Authorization: Bearer KEY")
    ] = None,
    max_model_len: Annotated[int, typer.Option(help="max_model_len reported in /v1/models")] = 4096,
    eos_after_tokens: Annotated[
        int | None,
        typer.Option(help="a request without ignore_eos stops after this many (finish_reason stop)"),
    ] = None,
    served_model_name: Annotated[
        list[str] | None,
        typer.Option(help="like vllm serve: the model names served (repeatable); others get 404; none: any"),
    ] = None,
) -> None:
    """Serve a mock OpenAI-compatible API (/v1/completions, /v1/chat/completions) with set latencies."""
    given = dict(locals())  # every flag but the list is a MockConfig field of the same name
    from gpuplan.adapters.bench.mock.config import MockConfig
    from gpuplan.adapters.bench.mock.server import run

    if 0 <= port < 65536:  # out-of-range ports are the config's own error below
        check_listen_address(host, port)
    served = tuple(given.pop("served_model_name") or ())
    config = MockConfig.model_validate(given | {"served_model_names": served})

    def ready(bound: int) -> None:
        sys.stdout.write(f"mock server listening on http://{host}:{bound}\n")
        sys.stdout.flush()

    run(config, ready)

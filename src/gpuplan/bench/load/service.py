"""One load-test run end to end: store the run, stream every record into the store, summarise.

``resume``: reloads the run's stored config, skips every request index already stored and sends the
rest with the original spacing (the first missing one is due at once); the summary covers all rows.
"""

from __future__ import annotations

import asyncio
import platform
import socket
import sys
import uuid
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx

from gpuplan import __version__
from gpuplan.bench.load import runner
from gpuplan.bench.load.config import LoadConfig
from gpuplan.bench.load.summary import BenchSummary, summarize
from gpuplan.errors import BenchmarkError, UserInputError
from gpuplan.results.store import RecordWriter, Store


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def conditions(config: LoadConfig) -> dict[str, Any]:
    """What the numbers depend on besides the config: client host and software."""
    return {"host": socket.gethostname(), "platform": platform.platform(), "python": sys.version.split()[0],
            "httpx": _version("httpx"), "target": config.url, "model": config.model, "api": config.api}


def preflight(config: LoadConfig) -> None:
    """Fail fast, with one clear line, when nothing listens at the URL."""
    try:
        httpx.get(config.url.rstrip("/") + "/v1/models", timeout=5.0, trust_env=False)
    except httpx.HTTPError as exc:
        raise BenchmarkError(f"cannot reach {config.url}: {type(exc).__name__}: {exc}",
                             hint="is the server running? try gpuplan mock-server --port 8000") from None


def serve(config: LoadConfig | None, store_url: str | None = None, resume: str | None = None,
          announce: Callable[[str, str], None] | None = None) -> BenchSummary:
    """Run (or resume) a load test; every record is stored as it completes. Returns the summary."""
    store = Store(store_url)
    if resume is not None:
        info = store.run(resume)
        if info.kind != "serve":
            raise UserInputError(f"run {info.run_id} is a {info.kind} run, not a serve run")
        run_id, config = info.run_id, LoadConfig.model_validate(info.config)
        skip = {r.index for r in store.records(run_id)}
    elif config is None:
        raise UserInputError("give the load (--url, --model, --rate or --concurrency, ...) or --resume RUN_ID")
    else:
        run_id, skip = uuid.uuid4().hex, set()
    preflight(config)
    if resume is None:
        store.create_run(run_id, "serve", config.model_dump(mode="json"), conditions(config), __version__)
    else:
        store.set_status(run_id, "running")
    if announce is not None:
        announce(run_id, store.url)
    writer = RecordWriter(store, run_id)
    try:
        outcome = asyncio.run(runner.run(config, writer.put, skip))
    except KeyboardInterrupt:
        writer.close()
        store.set_status(run_id, "interrupted")
        raise BenchmarkError("interrupted; completed requests are stored",
                             hint=f"resume with gpuplan bench serve --resume {run_id}") from None
    writer.close()
    summary = summarize(run_id, config, store.records(run_id), outcome.loop_lag_ms)
    store.finish_run(run_id, "completed", summary.model_dump(mode="json"))
    return summary

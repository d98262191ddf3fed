"""One load-test run end to end: store the run, stream every record into the store, summarise.

``resume``: reloads the run's stored config, skips every request index already stored and sends the
rest with the original spacing (the first missing one is due at once); the summary covers all rows.
``hooks`` lets the CLI follow the run (progress bar) without this layer knowing about terminals.

``sweep_rates`` (one run per rate), ``profile_sweep`` (GuideLLM's sweep: synchronous, throughput, then
rates between; :mod:`gpuplan.adapters.bench.load.sweep_profile`) and ``max_rate_under_slo`` (the highest
rate meeting P99 limits) make several such runs, each stored on its own
(:mod:`gpuplan.adapters.bench.load.search`).
"""

from __future__ import annotations

import platform
import socket
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan import __version__
from gpuplan.adapters.bench.load import endpoint, metrics, runner, search, server_view, sweep_profile
from gpuplan.adapters.bench.load.brakes import limit_text
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.preflight import check_endpoint
from gpuplan.adapters.bench.load.summary import BenchSummary, summarise
from gpuplan.adapters.store.database import RecordWriter, Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import BenchmarkError, UserInputError
from gpuplan.core.sla import Sla


@dataclass
class Hooks:
    """Callbacks: ``announce(run_id, store_url)``; ``start(expected requests or None)``; ``record(r)``
    (called on the load loop's thread: keep it cheap)."""

    announce: Callable[[str, str], None] | None = None
    start: Callable[[int | None], None] | None = None
    record: Callable[[RequestRecord], None] | None = None


@dataclass(frozen=True)
class Access:
    """The secrets of a run, given again to resume it (they are never stored): the API key and the
    ``--header`` values."""

    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def conditions(config: LoadConfig, server: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the numbers depend on besides the config: client host and software, and what stands behind
    the endpoint (``server``: :func:`endpoint.server_info`; ``deployment``: the flags, else what it said)."""
    server = server or {}
    return {
        "server": server,
        "deployment": endpoint.deployment(config, server),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "client": "gpuplan raw HTTP/1.1",
        "workers": config.workers,
        "target": config.url,
        "model": config.model,
        "api": config.api,
        "api_key_given": config.api_key is not None,
    }


def _expected(config: LoadConfig, skip: set[int]) -> int | None:
    if not config.open_loop:
        return None if config.num_prompts is None else sum(i not in skip for i in range(config.num_prompts))
    from gpuplan.adapters.bench.load.workload import build

    return sum(i not in skip for i in range(len(build(config).offsets)))


def _open(
    store: Store, config: LoadConfig | None, resume: str | None, access: Access
) -> tuple[str, LoadConfig, set[int]]:
    if resume is not None:
        info = store.run(resume)
        if info.kind != "serve":
            raise UserInputError(f"run {info.run_id} is a {info.kind} run, not a serve run")
        if info.live:
            raise UserInputError(
                f"--resume {resume}: run {info.run_id} is still running in another process",
                hint="wait for it to finish, or stop that process first",
            )
        stored = LoadConfig.from_stored(info.config)
        return (
            info.run_id,
            stored.resumed_with(api_key=access.api_key, headers=access.headers),
            {r.index for r in store.records(info.run_id)},
        )
    if config is None:
        raise UserInputError(
            "give the load (--url, --model, --rate or --concurrency, ...) or --resume RUN_ID"
        )
    return uuid.uuid4().hex, config, set()


def serve(
    config: LoadConfig | None,
    store_url: str | None = None,
    resume: str | None = None,
    announce: Callable[[str, str], None] | None = None,
    hooks: Hooks | None = None,
    access: Access | None = None,
) -> BenchSummary:
    """Run (or resume) a load test; every record is stored as it completes. Returns the summary;
    ``access``: the secrets given again to resume a run."""
    hooks = hooks or Hooks(announce=announce)
    store = Store(store_url)
    run_id, config, skip = _open(store, config, resume, access or Access())
    deployment = _begin(store, run_id, config, resume is not None, skip, hooks)
    scraper = metrics.Scraper(config.metrics_url, config.metrics_interval_s) if config.metrics_url else None
    outcome = _drive(store, run_id, config, skip, hooks, scraper)
    server = scraper.stop() if scraper is not None else None
    summary = summarise(
        run_id,
        config,
        store.records(run_id),
        outcome.loop_lag_ms,
        outcome.cpu_s,
        len(outcome.records),
        server,
        deployment,
    ).model_copy(update={"server_vs_client": server_view.side_by_side(server, outcome.records)})
    store.finish_run(run_id, "stopped" if outcome.stopped else "completed", summary.model_dump(mode="json"))
    if outcome.stopped:
        raise BenchmarkError(
            f"stopped at --max-errors {limit_text(config)}: {summary.requests_failed} of "
            f"{summary.requests_sent} requests failed ({_kinds(summary)}); what was measured is stored "
            f"in run {run_id}",
            hint=f"gpuplan results show {run_id}",
        )
    if summary.requests_completed == 0 and summary.requests_failed > 0:
        raise BenchmarkError(
            f"every request failed ({_kinds(summary)}); run {run_id} is stored",
            hint="check --url, --model (the server's model name) and --api",
        )
    return summary


def _kinds(summary: BenchSummary) -> str:
    return ", ".join(f"{kind} x{count}" for kind, count in sorted(summary.errors.items()))


def _begin(
    store: Store, run_id: str, config: LoadConfig, resuming: bool, skip: set[int], hooks: Hooks
) -> dict[str, Any]:
    """Check the target and the files, record the run (or mark the resumed one running), tell the hooks;
    returns the run's recorded deployment."""
    cards = check_endpoint(config)
    from gpuplan.adapters.bench.load.workload import build

    build(config)  # reads the trace and prompt files: a bad file fails here, before a run is recorded
    if resuming:
        store.set_status(run_id, "running")
        recorded = store.run(run_id).conditions.get("deployment")
        deployment = recorded if isinstance(recorded, dict) else {}
    else:
        found = conditions(config, endpoint.server_info(config, cards))
        deployment = found["deployment"]
        store.create_run(run_id, "serve", config.model_dump(mode="json"), found, __version__)
    if hooks.announce is not None:
        hooks.announce(run_id, store.display_url)
    if hooks.start is not None:
        hooks.start(_expected(config, skip))
    return deployment


def _drive(
    store: Store,
    run_id: str,
    config: LoadConfig,
    skip: set[int],
    hooks: Hooks,
    scraper: metrics.Scraper | None,
) -> runner.Outcome:
    """Send the load, every record into the store as it completes, the server's metrics scraped
    meanwhile; Ctrl-C leaves the run resumable (``interrupted``), any other failure marks it ``failed``
    after storing what completed."""
    writer = RecordWriter(store, run_id)
    sink = writer.put if hooks.record is None else _tee(writer.put, hooks.record)
    if scraper is not None:
        scraper.start()
    try:
        outcome = runner.run(config, sink, skip)
    except KeyboardInterrupt:
        if scraper is not None:
            scraper.stop()
        writer.close()
        store.set_status(run_id, "interrupted")
        raise BenchmarkError(
            "interrupted; completed requests are stored",
            hint=f"resume with gpuplan bench serve --resume {run_id}",
        ) from None
    except Exception:  # a failure outside any one request (each is stored classed): never left "running"
        if scraper is not None:
            scraper.stop()
        try:
            writer.close()
        finally:
            store.set_status(run_id, "failed")
        raise
    writer.close()
    return outcome


def _tee(
    first: Callable[[RequestRecord], None], second: Callable[[RequestRecord], None]
) -> Callable[[RequestRecord], None]:
    def both(record: RequestRecord) -> None:
        first(record)
        second(record)

    return both


def sweep_rates(
    config: LoadConfig | None,
    rates_rps: Sequence[float],
    store_url: str | None = None,
    hooks: Hooks | None = None,
) -> list[BenchSummary]:
    """One open-loop run of ``config`` per rate, in the order given, each stored as :func:`serve` stores
    it; ``config`` None (a resumed run) is refused."""
    if config is None:
        raise UserInputError("--rates cannot be combined with --resume")
    return search.sweep(config, rates_rps, _serving(store_url, hooks))


def profile_sweep(
    config: LoadConfig | None,
    size: int,
    store_url: str | None = None,
    hooks: Hooks | None = None,
) -> sweep_profile.SweepResult:
    """GuideLLM's sweep of ``size`` levels over ``config``'s workload (its load is replaced level by
    level), each level stored as :func:`serve` stores it; ``config`` None (a resumed run) is refused."""
    if config is None:
        raise UserInputError("--profile sweep cannot be combined with --resume")
    return sweep_profile.profile_sweep(config, _serving(store_url, hooks), size)


def max_rate_under_slo(
    config: LoadConfig | None,
    sla: Sla,
    max_steps: int,
    store_url: str | None = None,
    hooks: Hooks | None = None,
) -> search.SloSearch:
    """The highest open-loop rate whose runs meet the SLA's P99 TTFT/TPOT limits, starting at
    ``config.rate_rps``, in at most ``max_steps`` stored runs (:func:`search.max_rate_under_slo`)."""
    if config is None or config.rate_rps is None:
        raise UserInputError("--max-rate-under-slo needs --rate (the first rate tried), not --resume")
    if sla.empty:
        raise UserInputError("--max-rate-under-slo needs --slo-ttft-p99-ms and/or --slo-tpot-p99-ms")
    if max_steps < 1:
        raise UserInputError(f"--search-steps must be >= 1, got {max_steps}", hint="e.g. --search-steps 8")
    return search.max_rate_under_slo(
        config, _serving(store_url, hooks), start_rps=config.rate_rps, sla=sla, max_steps=max_steps
    )


def _serving(store_url: str | None, hooks: Hooks | None) -> search.Runner:
    """:func:`serve` as the searches' runner: each step a new stored run, followed by the same hooks."""
    return lambda config: serve(config, store_url, hooks=hooks)

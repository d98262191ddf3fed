"""``gpuplan bench serve``: load-test an OpenAI-compatible endpoint (one run, a sweep of rates, GuideLLM's
``--profile sweep`` or the highest rate under a P99 SLO), every request stored as it completes
(docs/bench.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuplan.adapters.bench.load.config import METRICS_INTERVAL_S
from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.cli import render
from gpuplan.interfaces.cli.app import fmt, guarded
from gpuplan.interfaces.cli.cmd_bench import StoreOpt, announce, bench_app, summary_table
from gpuplan.interfaces.cli.serve_options import (
    ApiKeyOpt,
    DatasetOpt,
    DatasetPathOpt,
    DurationOpt,
    EngineOpt,
    EngineVersionOpt,
    ExtraBodyOpt,
    GoodputOpt,
    GpuOpt,
    HeaderOpt,
    HfOutputLenOpt,
    HfSplitOpt,
    HfSubsetOpt,
    IgnoreEosOpt,
    InputOpt,
    LabelOpt,
    MaxConcOpt,
    MaxErrorsOpt,
    MetadataOpt,
    MetricPctOpt,
    MetricsIntervalOpt,
    MetricsUrlOpt,
    NumPrefixesOpt,
    NumPromptsOpt,
    OutputOpt,
    PctMetricsOpt,
    PrefixLenOpt,
    ProfileOpt,
    ProgressOpt,
    PromptsOpt,
    RangeRatioOpt,
    RateOpt,
    RequestRateOpt,
    ScrapeOpt,
    SearchOpt,
    TemperatureOpt,
    TopKOpt,
    TopPOpt,
    TpOpt,
    TraceOpt,
)

if TYPE_CHECKING:  # names for the annotations only: the load tester is imported when a command runs
    from gpuplan.adapters.bench.load.config import LoadConfig
    from gpuplan.core.sla import Sla
    from gpuplan.usecases.bench_serve import Access, Hooks

DEFAULT_DURATION_S = 30.0
"""Measured seconds of a rate or concurrency run without --duration (the --duration help says so)."""
SEARCH_LIMIT_FLAGS = {"ttft_p99_ms": "--slo-ttft-p99-ms", "tpot_p99_ms": "--slo-tpot-p99-ms"}
"""The ``Sla`` limit each flag of the max-rate search sets."""


NO_TIME_BOUND_S = 86_400.0
"""The duration of a ``--num-prompts`` run without ``--duration``: the config's cap, one day (the count ends it)."""
SWEEP_BASE_RATE_RPS = 1.0
"""The rate of the config a ``--profile sweep`` is built from: only to validate it as an open loop (so
``--max-concurrency`` is accepted); every level replaces the load (``sweep_profile``)."""


@dataclass(frozen=True)
class ServeRequest:
    """What ``bench serve`` was asked: the validated load (None when resuming), the run to resume,
    the rates of a sweep, the SLO search ``(its P99 limits, most runs)`` when asked, the secrets
    (key, headers) to resume with, and the levels of a ``--profile sweep``."""

    config: LoadConfig | None
    resume: str | None
    sweep_rates_rps: list[float]
    slo_search: tuple[Sla, int] | None
    access: Access
    sweep_size: int | None = None


# fmt: off
@bench_app.command("serve")
@guarded
def bench_serve(
    url: Annotated[str | None, typer.Option(help="server base, http://host:port")] = None,
    model: Annotated[str | None, typer.Option(help="model name sent in each request")] = None,
    rate: RateOpt = None, request_rate: RequestRateOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="closed loop: requests in flight")] = None,
    max_concurrency: MaxConcOpt = None, num_prompts: NumPromptsOpt = None, trace: TraceOpt = None,
    rates: Annotated[str | None, typer.Option(help="sweep: one run per rate, e.g. 10,20,40")] = None,
    profile: ProfileOpt = None, max_rate_under_slo: SearchOpt = False,
    slo_ttft_p99_ms: Annotated[float | None, typer.Option(help="P99 TTFT limit of the search")] = None,
    slo_tpot_p99_ms: Annotated[float | None, typer.Option(help="P99 TPOT limit of the search")] = None,
    search_steps: Annotated[int, typer.Option(help="most runs the search makes")] = 8,
    arrival: Annotated[str, typer.Option(help="poisson, constant or gamma")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape k (1 = Poisson)")] = 1.0,
    duration: DurationOpt = None,
    warmup: Annotated[float, typer.Option(help="seconds of load before measuring")] = 0.0,
    input_tokens: InputOpt = 256, output_tokens: OutputOpt = 128, random_range_ratio: RangeRatioOpt = 0.0,
    prompts: PromptsOpt = None, dataset_name: DatasetOpt = "random", dataset_path: DatasetPathOpt = None,
    hf_split: HfSplitOpt = None, hf_subset: HfSubsetOpt = None, hf_output_len: HfOutputLenOpt = None,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    api_key: ApiKeyOpt = None, header: HeaderOpt = None, extra_body: ExtraBodyOpt = None,
    temperature: TemperatureOpt = 0.0, top_p: TopPOpt = None, top_k: TopKOpt = None,
    ignore_eos: IgnoreEosOpt = True, max_errors: MaxErrorsOpt = None,
    slo_ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit for goodput")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit for goodput")] = None,
    timeout: Annotated[float, typer.Option(help="per-request timeout, s")] = 60.0,
    workers: Annotated[int, typer.Option(help="client processes sharing the schedule")] = 1,
    scrape_metrics: ScrapeOpt = False, metrics_url: MetricsUrlOpt = None, seed: Annotated[int, typer.Option()] = 0,
    metrics_interval_s: MetricsIntervalOpt = METRICS_INTERVAL_S,
    resume: Annotated[str | None, typer.Option(help="RUN_ID of an interrupted run to complete")] = None,
    prefix_len: PrefixLenOpt = None, num_prefixes: NumPrefixesOpt = None, goodput: GoodputOpt = None,
    percentile_metrics: PctMetricsOpt = None, metric_percentiles: MetricPctOpt = None,
    label: LabelOpt = None, metadata: MetadataOpt = None,
    gpu: GpuOpt = None, engine: EngineOpt = None, engine_version: EngineVersionOpt = None, tp: TpOpt = None,
    store: StoreOpt = None, progress: ProgressOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Load-test an OpenAI-compatible endpoint; every request is stored as it completes."""
    given = dict(locals())
    shape = fmt(format)
    search = (_search_sla(slo_ttft_p99_ms, slo_tpot_p99_ms), search_steps) if max_rate_under_slo else None
    request = _request(_load(given), rates, resume, search, profile)
    with _progress(progress if progress is not None else sys.stderr.isatty()) as hooks:
        _run(request, store, hooks, shape)
# fmt: on


def _load(given: dict[str, Any]) -> dict[str, Any]:
    """The load config's fields from the flags as typed; the compound flags read by
    :mod:`gpuplan.adapters.bench.load.flags` (a bad one is a one-line error naming it)."""
    from gpuplan.adapters.bench.load import flags

    rate_rps, all_at_once = flags.request_rate(given["rate"], given["request_rate"])
    max_count, max_share = flags.max_errors(given["max_errors"])
    paths = {k: str(given[k]) if given[k] else None for k in ("trace", "prompts", "dataset_path")}
    return {
        "url": given["url"], "model": given["model"], "api": given["api"], "rate_rps": rate_rps,
        "all_at_once": all_at_once, "concurrency": given["concurrency"], "max_concurrency": given["max_concurrency"],
        "num_prompts": given["num_prompts"], "trace_path": paths["trace"], "prompts_path": paths["prompts"],
        "dataset": given["dataset_name"].replace("-", "_"), "dataset_path": paths["dataset_path"],
        "range_ratio": given["random_range_ratio"], "arrival": given["arrival"], "burstiness": given["burstiness"],
        "duration_s": given["duration"], "warmup_s": given["warmup"], "input_tokens": given["input_tokens"],
        "output_tokens": given["output_tokens"], "seed": given["seed"], "request_timeout_s": given["timeout"],
        "slo_ttft_ms": given["slo_ttft_ms"], "slo_tpot_ms": given["slo_tpot_ms"], "workers": given["workers"],
        "metrics_url": given["metrics_url"] or _default_metrics_url(given["url"], given["scrape_metrics"]),
        "metrics_interval_s": given["metrics_interval_s"],
        "api_key": given["api_key"], "headers": flags.headers(given["header"]),
        "extra_body": flags.extra_body(given["extra_body"]), "temperature": given["temperature"],
        "top_p": given["top_p"], "top_k": given["top_k"], "ignore_eos": given["ignore_eos"],
        "max_errors": max_count, "max_error_share": max_share, "gpu": given["gpu"], "engine": given["engine"],
        "engine_version": given["engine_version"], "tp": given["tp"], "label": given["label"],
        "metadata": flags.metadata(given["metadata"]), **_workload_extras(given),
    }  # fmt: skip


def _workload_extras(given: dict[str, Any]) -> dict[str, Any]:
    """The prefix workload's sizes, the percentiles asked for and the goodput limits (only those given, so
    the config's defaults stay vLLM's); ``--goodput`` and ``--slo-*-ms`` may not both set one limit."""
    from gpuplan.adapters.bench.load import flags

    extras: dict[str, Any] = {
        "prefix_len": given["prefix_len"],
        "num_prefixes": given["num_prefixes"],
        "percentile_metrics": flags.comma_list("--percentile-metrics", given["percentile_metrics"]),
        "metric_percentiles": flags.comma_list("--metric-percentiles", given["metric_percentiles"]),
        "hf_split": given["hf_split"],
        "hf_subset": given["hf_subset"],
        "hf_output_len": given["hf_output_len"],
    }
    sized = extras["prefix_len"] is not None or extras["num_prefixes"] is not None
    if sized and given["dataset_name"].replace("-", "_") != "prefix_repetition":
        raise UserInputError("--prefix-len/--num-prefixes size --dataset-name prefix_repetition only")
    limits = flags.goodput(given["goodput"])
    for field, flag in (("slo_ttft_ms", "--slo-ttft-ms"), ("slo_tpot_ms", "--slo-tpot-ms")):
        if field in limits and given[field] is not None:
            raise UserInputError(f"give {flag} or --goodput {field.split('_')[1]}:MS, not both")
    return {k: v for k, v in extras.items() if v is not None} | limits


def _default_metrics_url(url: str | None, scrape_metrics: bool) -> str | None:
    return url.rstrip("/") + "/metrics" if scrape_metrics and url else None


def _search_sla(ttft_p99_ms: float | None, tpot_p99_ms: float | None) -> Sla:
    """The search's limits as an ``Sla``; a value it refuses is a one-line error naming the flag."""
    from pydantic import ValidationError

    from gpuplan.core.sla import Sla

    try:
        return Sla(ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=tpot_p99_ms)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = SEARCH_LIMIT_FLAGS[str(first["loc"][0])]
        raise UserInputError(f"{flag} {first['input']:g}: {first['msg']} (ms)") from None


def _request(
    load: dict[str, Any],
    rates: str | None,
    resume: str | None,
    slo_search: tuple[Sla, int] | None,
    profile: str | None = None,
) -> ServeRequest:
    """The flags as one request; a sweep or search without --rate starts at its first rate; a
    ``--profile sweep`` reads ``--rate`` as its number of levels."""
    from gpuplan.adapters.bench.load import flags
    from gpuplan.usecases.bench_serve import Access

    sweep_rates_rps = _rates_rps(rates)
    size = flags.sweep_size(profile, load["rate_rps"], load["all_at_once"])
    if size is not None:
        _check_profile_alone(load, bool(sweep_rates_rps), slo_search is not None, resume)
        load["rate_rps"] = SWEEP_BASE_RATE_RPS
    if (sweep_rates_rps or slo_search is not None) and resume is None:
        load["rate_rps"] = load["rate_rps"] or (sweep_rates_rps[0] if sweep_rates_rps else None)
    config = None if resume is not None else _load_config(load)
    access = Access(load["api_key"], load["headers"])
    return ServeRequest(config, resume, sweep_rates_rps, slo_search, access, size)


def _check_profile_alone(load: dict[str, Any], rates: bool, search: bool, resume: str | None) -> None:
    """``--profile sweep`` sets every level's load itself: a flag that sets a load too is refused."""
    given = {
        "--rates": rates,
        "--max-rate-under-slo": search,
        "--resume": resume is not None,
        "--concurrency": load["concurrency"] is not None,
        "--trace": load["trace_path"] is not None,
    }
    clash = [flag for flag, on in given.items() if on]
    if clash:
        raise UserInputError(
            f"--profile sweep sets the load of each level itself: drop {clash[0]}",
            hint="--profile sweep --rate N: N levels, from one request at a time to the saturation rate",
        )


def _rates_rps(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"--rates {text!r} must be numbers separated by commas, e.g. 10,20,40") from None
    if not values or min(values) <= 0:
        raise UserInputError(f"--rates {text!r}: every rate must be > 0")
    return values


def _load_config(load: dict[str, Any]) -> LoadConfig:
    from gpuplan.adapters.bench.load.config import LoadConfig
    from gpuplan.adapters.bench.load.workload import trace_span_s
    from gpuplan.interfaces.cli.cmd_bench_gpu import check_deployment

    check_deployment(None, gpu=load["gpu"], engine=load["engine"], tp=load["tp"] or 1, weight_dtype=None)
    if load["engine"] is not None:  # the engine profile's own name (vLLM -> vllm), as calibrate reads it
        from gpuplan.core.perf.engine_profiles import get_engine

        load["engine"] = get_engine(load["engine"]).name

    if load["duration_s"] is None and load["trace_path"]:
        load["duration_s"] = trace_span_s(load["trace_path"])
    elif load["duration_s"] is None:
        load["duration_s"] = NO_TIME_BOUND_S if load["num_prompts"] else DEFAULT_DURATION_S
    return LoadConfig.model_validate(load)


def _run(request: ServeRequest, store: str | None, hooks: Hooks, shape: str) -> None:
    from gpuplan.interfaces.cli import serve_searches

    if request.slo_search is not None:
        serve_searches.slo_search(request.config, store, hooks, shape, request.slo_search)
    elif request.sweep_size is not None:
        serve_searches.profile_sweep(request.config, store, hooks, shape, request.sweep_size)
    elif request.sweep_rates_rps:
        serve_searches.sweep(request.config, store, hooks, shape, request.sweep_rates_rps)
    else:
        _single(request.config, store, request.resume, hooks, shape, request.access)


@contextmanager
def _progress(enabled: bool) -> Iterator[Hooks]:
    """Service hooks; with ``enabled``, a rich progress bar of completed requests on stderr."""
    from gpuplan.usecases.bench_serve import Hooks

    if not enabled:
        yield Hooks(announce=announce)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.err_console,
        transient=True,
    )
    tasks: list[Any] = []

    def start(total: int | None) -> None:
        tasks.append(bar.add_task("requests", total=total))

    def record(_record: Any) -> None:
        bar.advance(tasks[-1])

    with bar:
        yield Hooks(announce=announce, start=start, record=record)


def _single(
    config: LoadConfig | None, store: str | None, resume: str | None, hooks: Hooks, shape: str, access: Access
) -> None:
    from gpuplan.usecases.bench_serve import serve

    summary = serve(config, store, resume, hooks=hooks, access=access)
    if shape == "json":
        render.emit_json(summary)
        return
    summary_table(summary.model_dump(mode="json"))

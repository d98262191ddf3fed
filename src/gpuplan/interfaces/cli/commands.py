"""Command definitions: each parses flags into one validated object, makes one call, renders."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.adapters.models.registry import list_models
from gpuplan.adapters.scenario_files.deployment import (
    ALL_LIMITS,
    ScenarioFile,
    is_training_document,
    load_scenario,
    parse_scenario,
    parse_training_scenario,
    read_scenario_text,
    scenario_notes,
)
from gpuplan.core.calibration.uncertainty import DEFAULT_LEVEL, Uncertainty
from gpuplan.core.errors import InfeasibleError, UserInputError
from gpuplan.interfaces.cli import feature_flags, views
from gpuplan.interfaces.cli.app import (
    CalibrationOpt,
    CatalogOpt,
    ConfidenceOpt,
    Format,
    FormatOpt,
    IntervalOpt,
    PriceBasisOpt,
    ProviderOpt,
    app,
    catalog_from,
    fmt,
    guarded,
    refuse_flags,
    uncertainty_from,
)
from gpuplan.interfaces.cli.cmd_train import (
    InterNodeGbpsOpt,
    TrainFlags,
    predict_training_scenario,
    recommend_training,
)
from gpuplan.interfaces.cli.render import note, progress_bar
from gpuplan.interfaces.cli.serving_flags import (
    DOCUMENT_IS_THE_REQUEST,
    SERVING_ONLY,
    SERVING_REQUEST,
    TRAIN_GLOBAL_BATCH,
    TRAINING_FLAGS,
    GlobalBatchOpt,
    KvGbpsOpt,
    KvOverlapOpt,
    KvTransportOpt,
    LayoutsOpt,
    MethodOpt,
    MixedPoolsOpt,
    SeqLenOpt,
    ServingFlags,
    TokensOpt,
    scenario_from_flags,
)
from gpuplan.interfaces.plots import serving as plots
from gpuplan.usecases import fit as fit_usecase
from gpuplan.usecases import resolve
from gpuplan.usecases.calibration.profile import load_calibration
from gpuplan.usecases.predict import predict_from_scenario
from gpuplan.usecases.pricing import scenario_price_basis
from gpuplan.usecases.recommend import recommend_from_scenario, throughput_scaling

EXAMPLE_SCENARIO = """\
# The README's question: Qwen2.5-32B to ~20 requests/s, 2k-token prompts, 300-token answers,
# TTFT under 1 s and TPOT under 50 ms. Which GPU, how many, at what cost?
model: Qwen/Qwen2.5-32B-Instruct
workload: {input_tokens: 2048, output_tokens: 300, rate_rps: 20}
sla: {ttft_ms: 1000, tpot_ms: 50}
hardware: {max_gpus: 64}
"""


@app.command()
@guarded
def gpus(catalog: CatalogOpt = None, format: FormatOpt = "table") -> None:
    """List the GPU catalog: memory, bandwidth, dense TFLOPS, links, power, price."""
    views.gpus(catalog_from(catalog), fmt(format))


@app.command()
@guarded
def models(format: FormatOpt = "table") -> None:
    """List the bundled models with parameter counts and KV bytes per token."""
    views.models(list_models(), fmt(format))


@app.command()
@guarded
def dtypes(format: FormatOpt = "table") -> None:
    """List weight / KV-cache dtypes: bytes per element with scale overhead and the GEMM path used."""
    views.dtypes(fmt(format))


@app.command("fit")
@guarded
def fit_cmd(
    model: Annotated[str | None, typer.Option(help="HF id, bundled id or path to config.json")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU id, e.g. H100-SXM")] = None,
    count: Annotated[int, typer.Option(help="GPUs in the replica")] = 1,
    tp: Annotated[int | None, typer.Option(help="tensor parallel (default: count / pp)")] = None,
    pp: Annotated[int, typer.Option()] = 1,
    dtype: Annotated[str, typer.Option(help="weight dtype: bf16 fp16 fp8 int8 int4 nf4 fp4")] = "bf16",
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype (default: follows weights)")] = None,
    engine: Annotated[str, typer.Option(help="vllm trtllm sglang ...")] = "vllm",
    context: Annotated[int | None, typer.Option(help="tokens per request (max_model_len)")] = None,
    utilization: Annotated[float | None, typer.Option(help="gpu_memory_utilization")] = None,
    plot: Annotated[Path | None, typer.Option(help="write the memory chart: FILE.html or FILE.png")] = None,
    scenario: Annotated[
        Path | None, typer.Option(help="take everything from a scenario YAML (inference or training)")
    ] = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
    interval: IntervalOpt = DEFAULT_LEVEL,
) -> None:
    """Does it fit? Memory breakdown per GPU and the KV capacity left for requests (or, for a training
    scenario, weights, gradients, optimizer states and activations per GPU)."""
    if scenario is not None:
        refuse_flags(
            DOCUMENT_IS_THE_REQUEST, model=model, gpu=gpu, tp=tp, kv_dtype=kv_dtype, context=context,
            utilization=utilization,
        )  # fmt: skip
        _fit_scenario(scenario, catalog, fmt(format), plot, uncertainty_from(interval))
        return
    if not (model and gpu):
        raise UserInputError("fit needs --model and --gpu, or --scenario FILE")
    result = fit_usecase.fit(
        model, gpu, catalog_from(catalog), count=count, tp=tp, pp=pp, weight_dtype=dtype, kv_dtype=kv_dtype,
        engine=engine, context_tokens=context, utilization=utilization, uncertainty=uncertainty_from(interval),
    )  # fmt: skip
    views.fit(result, fmt(format))
    if plot is not None:
        plots.write_fit_plot(plot, result)
    _exit_unless_fits(result.memory.fits)


def _fit_scenario(path: Path, catalog: CatalogOpt, out: Format, plot: Path | None, sure: Uncertainty) -> None:
    text = read_scenario_text(path)
    if is_training_document(text):
        predict_training_scenario(parse_training_scenario(text, origin=str(path)), catalog, out)
        return
    sc = parse_scenario(text, origin=str(path))
    result = fit_usecase.fit_from_scenario(sc, catalog_from(catalog), sure)
    views.fit(result, out)
    if plot is not None:
        plots.write_fit_plot(plot, result)
    _exit_unless_fits(result.memory.fits)


def _exit_unless_fits(fits: bool) -> None:
    """A breakdown that does not fit is printed in full, then exits 2 (infeasible) for scripts."""
    if not fits:
        raise typer.Exit(InfeasibleError.exit_code)


@app.command()
@guarded
def predict(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML")],
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
    interval: IntervalOpt = DEFAULT_LEVEL,
    spec_method: feature_flags.SpecMethodOpt = None,
    spec_tokens: feature_flags.SpecTokensOpt = None,
    spec_acceptance: feature_flags.SpecAcceptanceOpt = None,
    draft_model: feature_flags.DraftModelOpt = None,
    prefix_hit_rate: feature_flags.PrefixHitRateOpt = None,
    engine_version: feature_flags.EngineVersionOpt = None,
) -> None:
    """Latency, throughput and cost of one deployment on one workload (a ``training`` section: step time
    and memory). Reads simulate's document, its ``workload`` only (``arrival``, ``simulation``, ``sla``: simulate's)."""
    text = read_scenario_text(scenario)
    features = resolve.DeploymentFeatures(
        spec_method, spec_tokens, spec_acceptance, draft_model, prefix_hit_rate, engine_version
    )
    if is_training_document(text):
        refuse_flags((" by a training scenario", "drop them"), **features.given())
        predict_training_scenario(parse_training_scenario(text, origin=str(scenario)), catalog, fmt(format))
        return
    sc = resolve.with_features(parse_scenario(text, origin=str(scenario), sla_limits=ALL_LIMITS), features)
    cal, sure = load_calibration(calibration) if calibration else None, uncertainty_from(interval)
    result = predict_from_scenario(sc, catalog_from(catalog), cal, uncertainty=sure)
    views.predict(result, fmt(format))
    for line in scenario_notes(text):  # after the result: an error stays the one stderr line
        note(f"{scenario}: {line}")


@app.command()
@guarded
def recommend(
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (or use the flags)")] = None,
    model: Annotated[str | None, typer.Option(help="HF id, bundled id or path to config.json")] = None,
    input_tokens: Annotated[int | None, typer.Option(help="prompt tokens per request")] = None,
    output_tokens: Annotated[int | None, typer.Option(help="generated tokens per request")] = None,
    rate: Annotated[float | None, typer.Option(help="target requests/s")] = None,
    concurrency: Annotated[int | None, typer.Option(help="requests in flight")] = None,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit, ms")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit, ms")] = None,
    ttft_p99_ms: feature_flags.TtftP99Opt = None,
    tpot_p99_ms: feature_flags.TpotP99Opt = None,
    gpus: Annotated[str | None, typer.Option(help="comma-separated GPU ids (default: all)")] = None,
    max_gpus: Annotated[int, typer.Option(help="most GPUs in a plan")] = 64,
    dtypes: Annotated[str, typer.Option(help="weight dtypes to consider")] = "bf16,fp8,int4",
    engine: Annotated[str, typer.Option()] = "vllm",
    objective: Annotated[str, typer.Option(help="cost, latency or throughput")] = "cost",
    budget: Annotated[float | None, typer.Option(help="max $/hour")] = None,
    example: Annotated[bool, typer.Option(help="run the built-in example")] = False,
    task: Annotated[str, typer.Option(help="infer | train | finetune")] = "infer",
    method: MethodOpt = None,
    seq_len: SeqLenOpt = None,
    tokens: TokensOpt = None,
    global_batch: GlobalBatchOpt = None,
    inter_node_gbps: InterNodeGbpsOpt = None,
    plot: Annotated[Path | None, typer.Option(help="also write the charts to FILE.html or FILE.png")] = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    provider: ProviderOpt = None,
    price_basis: PriceBasisOpt = None,
    format: FormatOpt = "table",
    interval: IntervalOpt = DEFAULT_LEVEL,
    confidence: ConfidenceOpt = None,
    layouts: LayoutsOpt = None,
    kv_transport: KvTransportOpt = None,
    kv_gbps: KvGbpsOpt = None,
    kv_overlap: KvOverlapOpt = False,
    mixed_pools: MixedPoolsOpt = False,
    spec_method: feature_flags.SpecMethodOpt = None,
    spec_tokens: feature_flags.SpecTokensOpt = None,
    spec_acceptance: feature_flags.SpecAcceptanceOpt = None,
    draft_model: feature_flags.DraftModelOpt = None,
    prefix_hit_rate: feature_flags.PrefixHitRateOpt = None,
    engine_version: feature_flags.EngineVersionOpt = None,
) -> None:
    """The cheapest plan that meets the SLA, the runner-ups, why not the others (--task train|finetune: training)."""
    spec = (spec_method, spec_tokens, spec_acceptance, draft_model, prefix_hit_rate, engine_version)
    features = resolve.DeploymentFeatures(*spec)
    train = TrainFlags(method, seq_len, tokens, global_batch, inter_node_gbps)
    flags, sure = ServingFlags.of(locals(), features=features), uncertainty_from(interval, confidence)
    files, basis = _Files(calibration, catalog, format, plot), (provider, price_basis)
    _recommend_task(task, flags, train, scenario, example, files, basis, sure)


@dataclass(frozen=True)
class _Files:
    """``recommend``'s calibration, catalog, output format and plot flags."""

    calibration: Path | None
    catalog: CatalogOpt
    format: str
    plot: Path | None


def _recommend_task(
    task: str,
    flags: ServingFlags,
    train: TrainFlags,
    scenario: Path | None,
    example: bool,
    files: _Files,
    basis: tuple[str | None, str | None],
    sure: Uncertainty,
) -> None:
    """A training request (--task train|finetune) or a serving one, each refusing the other's flags."""
    if _task(task) != "infer":
        out = fmt(files.format)
        _recommend_training_task(task, flags, scenario, train, out, files.catalog, files.calibration, basis)
        return
    refuse_flags(SERVING_REQUEST, **dataclasses.asdict(train))
    sc = _serving_scenario(example, scenario, flags)
    _recommend_serving(sc, files.calibration, files.catalog, files.format, files.plot, basis, sure)


def _recommend_training_task(
    task: str,
    flags: ServingFlags,
    scenario: Path | None,
    train: TrainFlags,
    out: str,
    catalog: CatalogOpt,
    calibration: Path | None,
    basis: tuple[str | None, str | None],
) -> None:
    """``recommend --task train|finetune``: refuse the serving flags, then rank training plans."""
    why = (f" by --task {task} (a serving request's flags)", TRAINING_FLAGS)
    refuse_flags(
        why, **{n: getattr(flags, n) for n in SERVING_ONLY}, **flags.features.given(), scenario=scenario
    )
    recommend_training(
        task=task, method=train.method or "full", model=flags.model, seq_len=train.seq_len, tokens=train.tokens,
        gpus=flags.gpus, global_batch=train.global_batch or TRAIN_GLOBAL_BATCH, max_gpus=flags.max_gpus,
        objective=flags.objective, out=out, catalog=catalog, calibration=calibration, basis=basis,
        inter_node_gbps=train.inter_node_gbps,
    )  # fmt: skip


def _task(task: str) -> str:
    """``--task`` checked: infer, train or finetune."""
    if task not in ("infer", "train", "finetune"):
        raise UserInputError(f"--task {task!r} is not one of infer, train, finetune")
    return task


def _serving_scenario(example: bool, scenario: Path | None, flags: ServingFlags) -> ScenarioFile:
    """The serving request: the built-in example, a scenario file, or the flags (never a mix)."""
    if example or scenario is not None:
        refuse_flags(DOCUMENT_IS_THE_REQUEST, **flags.without_defaults())
    if example:
        return parse_scenario(EXAMPLE_SCENARIO, origin="built-in example")
    if scenario is not None:
        return load_scenario(scenario)
    return scenario_from_flags(flags)


def _recommend_serving(
    sc: ScenarioFile,
    calibration: Path | None,
    catalog: CatalogOpt,
    format: str,
    plot: Path | None,
    basis: tuple[str | None, str | None],
    sure: Uncertainty,
) -> None:
    """Rank the plans (a progress bar while P99s are simulated), print them, and draw them if asked.
    ``basis`` is (``--provider``, ``--price-basis``)."""
    cat = catalog_from(catalog)
    chosen = scenario_price_basis(sc, cat, provider=basis[0], basis=basis[1])
    cal = load_calibration(calibration) if calibration else None
    simulated = sc.sla.has_percentiles
    with progress_bar("sizing plans on simulated P99s") if simulated else nullcontext() as progress:
        rec = recommend_from_scenario(sc, cat, cal, progress=progress, basis=chosen, uncertainty=sure)
    views.recommendation(rec, fmt(format))
    if plot is not None:
        plots.write_recommendation_plot(plot, rec, throughput_scaling(sc, cat, rec))

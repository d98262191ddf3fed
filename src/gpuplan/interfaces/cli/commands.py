"""Command definitions: each parses flags into one validated object, makes one call, renders."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field, fields
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
from gpuplan.interfaces.cli.cmd_train import TrainFlags, predict_training_scenario, recommend_training
from gpuplan.interfaces.cli.render import note, progress_bar
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
) -> None:
    """Latency, throughput and cost of one deployment on one workload (a ``training`` section: step time
    and memory). Reads simulate's document, its ``workload`` only (``arrival``, ``simulation``, ``sla``: simulate's)."""
    text = read_scenario_text(scenario)
    features = resolve.DeploymentFeatures(
        spec_method, spec_tokens, spec_acceptance, draft_model, prefix_hit_rate
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
    method: Annotated[
        str | None, typer.Option(help="train/finetune: full | lora | qlora [default: full]")
    ] = None,
    seq_len: Annotated[int | None, typer.Option(help="train/finetune: tokens per sequence")] = None,
    tokens: Annotated[float | None, typer.Option(help="train/finetune: tokens to train on")] = None,
    global_batch: Annotated[
        int | None, typer.Option(help="train/finetune: sequences per step [default: 256]")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="also write the charts to FILE.html or FILE.png")] = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    provider: ProviderOpt = None,
    price_basis: PriceBasisOpt = None,
    format: FormatOpt = "table",
    interval: IntervalOpt = DEFAULT_LEVEL,
    confidence: ConfidenceOpt = None,
    spec_method: feature_flags.SpecMethodOpt = None,
    spec_tokens: feature_flags.SpecTokensOpt = None,
    spec_acceptance: feature_flags.SpecAcceptanceOpt = None,
    draft_model: feature_flags.DraftModelOpt = None,
    prefix_hit_rate: feature_flags.PrefixHitRateOpt = None,
) -> None:
    """The cheapest plan that meets the SLA, the runner-ups, why not the others (--task train|finetune: training)."""
    flags = ServingFlags(
        model=model, input_tokens=input_tokens, output_tokens=output_tokens, rate=rate, concurrency=concurrency,
        ttft_ms=ttft_ms, tpot_ms=tpot_ms, ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=tpot_p99_ms, gpus=gpus,
        max_gpus=max_gpus, dtypes=dtypes, engine=engine, objective=objective, budget=budget, confidence=confidence,
        features=resolve.DeploymentFeatures(spec_method, spec_tokens, spec_acceptance, draft_model, prefix_hit_rate),
    )  # fmt: skip
    basis = (provider, price_basis)
    if _task(task) != "infer":
        train = TrainFlags(method=method, seq_len=seq_len, tokens=tokens, global_batch=global_batch)
        _recommend_training_task(task, flags, scenario, train, fmt(format), catalog, calibration, basis)
        return
    refuse_flags(SERVING_REQUEST, method=method, seq_len=seq_len, tokens=tokens, global_batch=global_batch)
    sc, sure = _serving_scenario(example, scenario, flags), uncertainty_from(interval, confidence)
    _recommend_serving(sc, calibration, catalog, format, plot, basis, sure)


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
    )  # fmt: skip


def _task(task: str) -> str:
    """``--task`` checked: infer, train or finetune."""
    if task not in ("infer", "train", "finetune"):
        raise UserInputError(f"--task {task!r} is not one of infer, train, finetune")
    return task


@dataclass(frozen=True)
class ServingFlags:
    """``recommend``'s flags of a serving request, as given (None: not given)."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    rate: float | None
    concurrency: int | None
    ttft_ms: float | None
    tpot_ms: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    gpus: str | None
    max_gpus: int
    dtypes: str
    engine: str
    objective: str
    budget: float | None
    confidence: float | None = None
    """Not part of the request document (a file takes it too), but a training request refuses it."""
    features: resolve.DeploymentFeatures = field(default_factory=resolve.DeploymentFeatures)

    def without_defaults(self) -> dict[str, object]:
        """The flags that have no default (so a value means the user gave it), in order."""
        defaulted = ("max_gpus", "dtypes", "engine", "objective", "confidence", "features")
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in defaulted}
        return given | self.features.given()


def _serving_scenario(example: bool, scenario: Path | None, flags: ServingFlags) -> ScenarioFile:
    """The serving request: the built-in example, a scenario file, or the flags (never a mix)."""
    if example or scenario is not None:
        refuse_flags(DOCUMENT_IS_THE_REQUEST, **flags.without_defaults())
    if example:
        return parse_scenario(EXAMPLE_SCENARIO, origin="built-in example")
    if scenario is not None:
        return load_scenario(scenario)
    return _scenario_from_flags(flags)


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


SERVING_REQUEST = (
    " by a serving request (they are --task train|finetune flags)",
    "drop them, or add --task train",
)
TRAIN_GLOBAL_BATCH = 256
"""``recommend --task train``'s sequences per optimizer step when ``--global-batch`` is not given."""
DOCUMENT_IS_THE_REQUEST = (
    ": a scenario file (or --example) is the whole request",
    "put the values in the file, or drop the file and use flags only",
)
_SERVING = (
    "input_tokens output_tokens rate concurrency ttft_ms tpot_ms ttft_p99_ms tpot_p99_ms budget confidence"
)
SERVING_ONLY = tuple(_SERVING.split())  # the flags a training request refuses, in order
TRAINING_FLAGS = "training plans take --model, --method, --seq-len, --tokens, --gpus, --max-gpus, --objective"


def _scenario_from_flags(f: ServingFlags) -> ScenarioFile:
    """The scenario document the recommend flags describe, validated like a file."""
    # 0 tokens is not refused here: the document's field check names it
    if not (f.model and f.input_tokens is not None and f.output_tokens is not None):
        raise UserInputError(
            "recommend needs a scenario file, --example, or --model, --input-tokens and "
            "--output-tokens with --rate or --concurrency"
        )
    for flag, text in (("--gpus", f.gpus), ("--dtypes", f.dtypes)):
        if text is not None and not any(part.strip() for part in text.split(",")):
            raise UserInputError(f"{flag} {text!r} names nothing", hint=f"leave {flag} out for the default")
    doc = {
        "model": f.model,
        "engine": f.engine,
        "objective": f.objective,
        "workload": {
            "input_tokens": f.input_tokens,
            "output_tokens": f.output_tokens,
            "rate_rps": f.rate,
            "concurrency": f.concurrency,
        },
        "sla": {
            "ttft_ms": f.ttft_ms,
            "tpot_ms": f.tpot_ms,
            "ttft_p99_ms": f.ttft_p99_ms,
            "tpot_p99_ms": f.tpot_p99_ms,
        },
        "hardware": {
            "gpus": [g.strip() for g in f.gpus.split(",") if g.strip()] if f.gpus else None,
            "max_gpus": f.max_gpus,
        },
        "precision": {"allowed": [d.strip() for d in f.dtypes.split(",") if d.strip()]},
        "prices": {"max_usd_per_hour": f.budget},
    }
    return resolve.scenario_from_mapping(resolve.features_into(doc, f.features), names=RECOMMEND_FLAG_FIELDS)


RECOMMEND_FLAG_FIELDS = {
    "model": "--model",
    "engine": "--engine",
    "objective": "--objective",
    "workload.input_tokens": "--input-tokens",
    "workload.output_tokens": "--output-tokens",
    "workload.rate_rps": "--rate",
    "workload.concurrency": "--concurrency",
    **{
        f"sla.{limit}": f"--{limit.replace('_', '-')}"
        for limit in ("ttft_ms", "tpot_ms", "ttft_p99_ms", "tpot_p99_ms")
    },
    "hardware.gpus": "--gpus",
    "hardware.max_gpus": "--max-gpus",
    "precision.allowed": "--dtypes",
    "prices.max_usd_per_hour": "--budget",
    **resolve.FEATURE_FLAG_FIELDS,
}
"""The scenario field each ``recommend`` flag fills: an error names the flag the user typed."""

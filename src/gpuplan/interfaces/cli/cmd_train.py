"""Training commands: ``gpuplan train-plan`` (rank GPU × count × layout) and ``gpuplan train-fit``
(memory breakdown and step time of one layout)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.adapters.scenario_files.training import TrainingScenarioFile
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.calibration.uncertainty import DEFAULT_LEVEL, Bounds
from gpuplan.core.errors import InfeasibleError, UserInputError
from gpuplan.core.pricing import quote_label
from gpuplan.core.training.spec import TrainingJob, TrainingLayout
from gpuplan.core.training.step import StepPrediction
from gpuplan.core.units import GIB
from gpuplan.interfaces.cli.app import (
    CalibrationOpt,
    CatalogOpt,
    FormatOpt,
    IntervalOpt,
    PriceBasisOpt,
    ProviderOpt,
    app,
    catalog_from,
    fmt,
    guarded,
    uncertainty_from,
)
from gpuplan.interfaces.cli.render import emit_json, group_read, lines, ranged, table
from gpuplan.interfaces.cli.views import quote_lines
from gpuplan.usecases.calibration.profile import load_training_calibration
from gpuplan.usecases.pricing import price_basis as price_basis_of
from gpuplan.usecases.train import (
    TrainFitResult,
    TrainPlanRequest,
    TrainPlanResult,
    check_inter_node_gbps,
    fit_training,
    plan_training,
    resolve_method,
    tokens_to_train,
    with_inter_node_gbps,
)
from gpuplan.usecases.train_intervals import with_training_intervals
from gpuplan.usecases.training_plan import TrainPlan

__all__ = [
    "InterNodeGbpsOpt",
    "MethodOpt",
    "TrainFlags",
    "predict_training_scenario",
    "recommend_training",
    "render_train_plan",
    "train_fit",
    "train_plan",
]

MethodOpt = Annotated[str, typer.Option(help="full | lora | qlora | pretrain")]


def _training_calibration(path: Path | None) -> TrainingCalibration | None:
    """The training factors of a ``--calibration`` profile, loaded once here (None: the bundled ones)."""
    return load_training_calibration(path) if path else None


InterNodeGbpsOpt = Annotated[
    float | None,
    typer.Option(help="scale-out bandwidth per GPU, Gb/s one direction (default 400: NDR InfiniBand)"),
]


@app.command("train-plan")
@guarded
def train_plan(
    model: Annotated[str, typer.Option(help="HF id, bundled id or path to config.json")],
    seq_len: Annotated[int, typer.Option(help="tokens per sequence")],
    method: MethodOpt = "full",
    tokens: Annotated[float | None, typer.Option(help="tokens to train on")] = None,
    epochs: Annotated[float | None, typer.Option(help="epochs over --samples sequences")] = None,
    samples: Annotated[int | None, typer.Option(help="sequences in the dataset")] = None,
    global_batch: Annotated[int, typer.Option(help="sequences per optimizer step")] = 256,
    dtype: Annotated[str, typer.Option(help="bf16 | fp8 | fp4")] = "bf16",
    gpus: Annotated[str | None, typer.Option(help="comma-separated GPU ids (default: all)")] = None,
    max_gpus: Annotated[int, typer.Option(help="largest GPU count to try")] = 64,
    deadline_hours: Annotated[float | None, typer.Option(help="wall-time limit")] = None,
    objective: Annotated[str, typer.Option(help="time | cost")] = "time",
    inter_node_gbps: InterNodeGbpsOpt = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    provider: ProviderOpt = None,
    price_basis: PriceBasisOpt = None,
    format: FormatOpt = "table",
    interval: IntervalOpt = DEFAULT_LEVEL,
) -> None:
    """Rank GPU × count × parallel layout for training or fine-tuning a token budget."""
    out = fmt(format)
    check_inter_node_gbps(inter_node_gbps)
    req = TrainPlanRequest(
        model=model,
        method=resolve_method(method),
        tokens=tokens_to_train(tokens, epochs, samples, seq_len),
        seq_len=seq_len,
        global_batch=global_batch,
        dtype=dtype,
        max_gpus=max_gpus,
        gpus=tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else (),
        deadline_hours=deadline_hours,
        objective=objective,
        inter_node_gbps=inter_node_gbps,
    )
    cat = catalog_from(catalog)
    basis = price_basis_of(cat, provider=provider, basis=price_basis)
    tcal, sure = _training_calibration(calibration), uncertainty_from(interval)
    result = plan_training(req, cat, tcal, basis=basis)
    render_train_plan(with_training_intervals(result, cat, cal=tcal, uncertainty=sure), out)


@dataclass(frozen=True)
class TrainFlags:
    """``recommend --task train|finetune``'s own flags, as given (None: not given)."""

    method: str | None
    seq_len: int | None
    tokens: float | None
    global_batch: int | None
    inter_node_gbps: float | None = None


def recommend_training(
    *,
    task: str,
    method: str,
    model: str | None,
    seq_len: int | None,
    tokens: float | None,
    global_batch: int,
    gpus: str | None,
    max_gpus: int,
    objective: str,
    out: str,
    catalog: CatalogOpt,
    calibration: Path | None = None,
    basis: tuple[str | None, str | None] = (None, None),
    inter_node_gbps: float | None = None,
) -> None:
    """``gpuplan recommend --task train|finetune``: rank training plans (time, or cost when asked), with
    the training factors of a ``--calibration`` profile when given; ``basis`` is (``--provider``,
    ``--price-basis``)."""
    if not (model and seq_len and tokens):
        raise UserInputError(f"recommend --task {task} needs --model, --seq-len and --tokens")
    check_inter_node_gbps(inter_node_gbps)
    req = TrainPlanRequest.model_validate(
        {
            "model": model,
            "method": resolve_method(method, task=task),
            "tokens": tokens,
            "seq_len": seq_len,
            "global_batch": global_batch,
            "max_gpus": max_gpus,
            "objective": "cost" if objective == "cost" else "time",
            "gpus": tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else (),
            "inter_node_gbps": inter_node_gbps,
        }
    )
    cat = catalog_from(catalog)
    chosen = price_basis_of(cat, provider=basis[0], basis=basis[1])
    tcal = _training_calibration(calibration)
    result = plan_training(req, cat, tcal, basis=chosen)
    render_train_plan(
        with_training_intervals(result, cat, cal=tcal, uncertainty=uncertainty_from(DEFAULT_LEVEL)), out
    )


def _quotes(result: TrainPlanResult) -> None:
    """The price basis, each plan's quote, and the GPUs the basis does not quote."""
    quoted = quote_lines(
        result.price_basis, [p.price_quote for p in result.plans], [p.gpu for p in result.plans]
    )
    missing = sorted({p.gpu for p in result.plans if p.price_missing})
    if missing:
        quoted.append(
            f"No on-demand quote on this basis for {', '.join(missing)}: add one in a --catalog file "
            "(prices: [{gpu: ID, kind: on_demand, provider: NAME, usd: N, as_of: YYYY-MM-DD, source_url: URL}]) "
            "or choose another basis (--provider, --price-basis)."
        )
    lines(quoted, title="Quotes")


def render_train_plan(result: TrainPlanResult, out: str) -> None:
    """JSON or a ranked table of training plans with the rejections."""
    if out == "json":
        emit_json(result)
        return
    _plan_table(result)


def _plan_table(result: TrainPlanResult) -> None:
    rows = [
        [
            p.gpu,
            p.gpus,
            p.layout,
            _banded(p, "tokens_per_s_per_gpu"),
            p.step.mfu,
            p.step.hfu,
            _banded(p, "step_time_s"),
            p.memory_gib_per_gpu,
            p.cost.wall_hours,
            p.cost.usd_by_price_kind.get("on_demand", "no quote"),
            p.cost.energy_kwh,
            quote_label(p.price_quote) if p.price_quote else "-",
        ]
        for p in result.plans
    ]
    columns = [
        "gpu",
        "gpus",
        "layout",
        "tok/s/GPU",
        "MFU",
        "HFU",
        "step s",
        "GiB/GPU",
        "hours",
        "$ on-demand",
        "kWh",
        "quote",
    ]
    table(f"{result.model} {result.method}, {result.tokens:.3g} tokens", columns, rows)
    _breakdown_table(
        "step time by part, s (adds up to step s; the plans above, in order)",
        [f"{rank}. {p.gpu} x{p.gpus}" for rank, p in enumerate(result.plans, start=1)],
        [p.step for p in result.plans],
    )
    lines(result.why, title="Why")
    lines([f"MFU and HFU: {result.mfu_convention}", *result.factors.notes], title="conventions and factors")
    if result.plans and result.plans[0].interval is not None:
        lines(_interval_lines(result.plans[0].interval), title="Intervals")
    _quotes(result)
    if result.rejected:
        lines([f"{name}: {why}" for name, why in result.rejected[:10]], title="rejected")


def _breakdown_table(title: str, names: list[str], steps: list[StepPrediction]) -> None:
    """One row per plan: the parts of its step (``StepPrediction.breakdown``: compute, exposed
    communication, pipeline bubble, optimizer, QLoRA dequantisation and host launch time the GPU waits
    for), which add up to its step time."""
    columns = ["plan", "compute", "comm DP", "comm TP/CP/EP/PP", "bubble", "optimizer", "dequant", "host"]
    rows = [
        [name, *[seconds for _, seconds in step.breakdown()]] for name, step in zip(names, steps, strict=True)
    ]
    table(title, columns, rows)


@app.command("train-fit")
@guarded
def train_fit(
    model: Annotated[str, typer.Option(help="HF id, bundled id or path to config.json")],
    gpu: Annotated[str, typer.Option(help="GPU id, e.g. H100-SXM")],
    seq_len: Annotated[int, typer.Option(help="tokens per sequence")],
    method: MethodOpt = "full",
    micro_batch: Annotated[int, typer.Option(help="sequences per GPU per forward/backward")] = 1,
    global_batch: Annotated[int | None, typer.Option(help="sequences per step (default: micro × dp)")] = None,
    tp: Annotated[int, typer.Option()] = 1,
    pp: Annotated[int, typer.Option()] = 1,
    dp: Annotated[int, typer.Option()] = 1,
    cp: Annotated[int, typer.Option()] = 1,
    ep: Annotated[int, typer.Option()] = 1,
    virtual_stages: Annotated[
        int, typer.Option(help="interleaved pipeline: model chunks per PP rank (1 = plain 1F1B)")
    ] = 1,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3 (FSDP full shard = 3)")] = 0,
    checkpointing: Annotated[str, typer.Option(help="none | selective | full")] = "none",
    optimizer: Annotated[str, typer.Option(help="adamw | adamw_8bit | sgd")] = "adamw",
    lora_rank: Annotated[int, typer.Option()] = 16,
    dtype: Annotated[str, typer.Option(help="bf16 | fp8 | fp4")] = "bf16",
    allow_long_seq: Annotated[bool, typer.Option(help="allow seq_len beyond the model's positions")] = False,
    inter_node_gbps: InterNodeGbpsOpt = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Training memory per GPU (weights, grads, optimizer, activations) and step time of one layout."""
    out, gbps = fmt(format), check_inter_node_gbps(inter_node_gbps)
    degrees = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep}  # tensor, pipeline, data, context, expert
    knobs = {"virtual_stages": virtual_stages, "zero_stage": zero, "checkpointing": checkpointing}
    layout = TrainingLayout.model_validate({**degrees, **knobs, "micro_batch": micro_batch})
    job = TrainingJob.model_validate(
        {
            "method": resolve_method(method),
            "dtype": dtype,
            "seq_len": seq_len,
            "optimizer": optimizer,
            "global_batch": global_batch or micro_batch * dp,
            "lora_rank": lora_rank,
            "allow_long_seq": allow_long_seq,
        }
    )
    cal = with_inter_node_gbps(_training_calibration(calibration), gbps)
    _show_fit(fit_training(model, gpu, job, layout, catalog_from(catalog), cal), out)


def _show_fit(result: TrainFitResult, out: str) -> None:
    """The breakdown in full, then exit 2 (infeasible) when it does not fit, as inference ``fit`` does."""
    if out == "json":
        emit_json(result)
    else:
        _fit_table(result)
    if not result.fits:
        raise typer.Exit(InfeasibleError.exit_code)


def _fit_table(r: TrainFitResult) -> None:
    m = r.memory
    parts = [
        ("weights", m.weights_bytes),
        ("gradients", m.gradients_bytes),
        ("optimizer", m.optimizer_bytes),
        ("activations", m.activations_bytes),
        ("logits", m.logits_bytes),
        ("overhead", m.overhead_bytes),
        ("total", m.total_bytes),
    ]
    table(
        f"{r.model} on {r.gpu} ({r.layout}): {'fits' if r.fits else 'does NOT fit'} in {r.usable_gib:.1f} GiB",
        ["part", "GiB/GPU"],
        [[name, value / GIB] for name, value in parts],
    )
    if r.step is not None:
        table(
            "step",
            ["step s", "tok/s/GPU", "TFLOP/s/GPU", "MFU", "HFU"],
            [
                [
                    r.step.step_time_s,
                    r.step.tokens_per_s_per_gpu,
                    r.step.model_tflops_per_gpu,
                    r.step.mfu,
                    r.step.hfu,
                ]
            ],
        )
        _breakdown_table("step time by part, s (adds up to step s)", [r.gpu], [r.step])
        lines([f"MFU and HFU: {r.mfu_convention}"], title="conventions")


def predict_training_scenario(sc: TrainingScenarioFile, catalog: CatalogOpt, out: str) -> None:
    """``gpuplan predict`` / ``fit --scenario`` on a training scenario: what ``train-fit`` prints."""
    _show_fit(fit_training(sc.model, sc.hardware.gpu, sc.training, sc.layout, catalog_from(catalog)), out)


def _banded(p: TrainPlan, name: str) -> str | float:
    """A plan's step figure, with its interval when it has one: ``0.451 (0.318-0.746)``."""
    value = float(getattr(p.step, name))
    b = p.interval
    return value if b is None or name not in b.sources else ranged(value, b.low.get(name), b.high.get(name))


def _interval_lines(b: Bounds) -> list[str]:
    """What the best plan's intervals are made of: the level, then each figure's error-model group."""
    head = (
        f"(low-high) next to a figure: its {b.level:.0%} interval from the error model of held-out training "
        "residuals (docs/validate.md, Intervals); the best plan's read:"
    )
    return [head, *(f"{k}: {group_read(s)}" for k, s in b.sources.items())]

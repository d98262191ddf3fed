"""``gpuplan bench gpu``, ``gpuplan bench train`` and ``gpuplan calibrate`` (docs/bench.md).

torch and transformers are optional (extras ``gpu`` and ``train``): they are imported inside the
commands, and a missing one is one clear error line, not a traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.interfaces.cli import render
from gpuplan.interfaces.cli.app import CatalogOpt, FormatOpt, app, catalog_from, fmt, guarded
from gpuplan.interfaces.cli.cmd_bench import StoreOpt, announce, bench_app


def _require(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise UserInputError(
            f"this command needs {module}, which is not installed", hint=f"pip install 'gpuplan[{extra}]'"
        )


def _ints(raw: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise UserInputError(f"{what} {raw!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise UserInputError(f"{what} needs positive integers, got {raw!r}")
    return values


def _progress(row: Any) -> None:
    value = f"{row.value:.4g} {row.unit}" if row.value is not None else row.status
    sys.stderr.write(f"  {row.name}: {value}{f' ({row.reason})' if row.reason else ''}\n")
    sys.stderr.flush()


@bench_app.command("gpu")
@guarded
def bench_gpu(
    device: Annotated[str, typer.Option(help="auto, cuda or cpu")] = "auto",
    dtypes: Annotated[str, typer.Option(help="GEMM dtypes, comma-separated")] = "fp32,tf32,bf16,fp16,fp8",
    gemm_size: Annotated[
        int | None, typer.Option(help="n of the n×n×n GEMMs (default 8192 CUDA, 512 CPU)")
    ] = None,
    copy_mib: Annotated[int | None, typer.Option(help="copy buffer MiB (default 1024 CUDA, 64 CPU)")] = None,
    allreduce_mib: Annotated[int, typer.Option(help="all-reduce buffer MiB")] = 256,
    allreduce_ranks: Annotated[int | None, typer.Option(help="ranks (default: visible GPUs)")] = None,
    allreduce_backend: Annotated[str, typer.Option(help="nccl, or gloo (CPU, for tests)")] = "nccl",
    warmup: Annotated[int, typer.Option(help="untimed calls before timing")] = 3,
    repeats: Annotated[int, typer.Option(help="timed repeats (median reported)")] = 10,
    skip: Annotated[str, typer.Option(help="skip any of gemm,copy,h2d,d2h,allreduce")] = "",
    store: StoreOpt = None,
    format: FormatOpt = "table",
) -> None:
    """GPU micro-benchmarks: GEMM TFLOP/s per dtype, copy and all-reduce bandwidth (stored as measured)."""
    shape = fmt(format)
    _require("torch", "gpu")
    from gpuplan.adapters.bench.gpu.config import GpuBenchConfig
    from gpuplan.adapters.bench.gpu.runner import run_gpu_bench

    config = GpuBenchConfig.model_validate(
        {
            "device": device,
            "dtypes": tuple(d.strip() for d in dtypes.split(",") if d.strip()),
            "gemm_size": gemm_size,
            "copy_bytes": copy_mib * (1 << 20) if copy_mib else None,
            "allreduce_bytes": allreduce_mib * (1 << 20),
            "allreduce_ranks": allreduce_ranks,
            "allreduce_backend": allreduce_backend,
            "warmup": warmup,
            "repeats": repeats,
            "skip": tuple(s.strip() for s in skip.split(",") if s.strip()),
        }
    )
    summary = run_gpu_bench(config, store, on_result=_progress, announce=announce)
    if shape == "json":
        render.emit_json(summary)
        return
    rows = [
        [r["name"], r["status"], r["value"], r["unit"], r["median_s"], r.get("reason") or ""]
        for r in summary["results"]
    ]
    render.table(
        f"{summary['device_name']} ({summary['gpu'] or summary['device']})",
        ["measurement", "status", "value", "unit", "median s", "note"],
        rows,
    )


@bench_app.command("train")
@guarded
def bench_train(
    model: Annotated[str, typer.Option(help="bundled id, tiny-llama, or path to config.json")],
    batch_sizes: Annotated[str, typer.Option(help="comma-separated, e.g. 1,2,4,8")] = "1,2,4,8",
    seq_len: Annotated[int, typer.Option(help="tokens per sequence")] = 2048,
    method: Annotated[str, typer.Option(help="full or lora")] = "full",
    device: Annotated[str, typer.Option(help="auto, cuda or cpu")] = "auto",
    dtype: Annotated[
        str | None, typer.Option(help="fp32, bf16, fp16 (default bf16 on CUDA, fp32 on CPU)")
    ] = None,
    steps: Annotated[int, typer.Option(help="timed steps per batch size")] = 5,
    warmup_steps: Annotated[int, typer.Option(help="untimed steps first")] = 2,
    lora_rank: Annotated[int, typer.Option(help="LoRA rank")] = 16,
    gradient_checkpointing: Annotated[bool, typer.Option(help="recompute activations")] = False,
    store: StoreOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Training-step time per batch size (random weights from the config; OOM is a result)."""
    shape = fmt(format)
    _require("torch", "train")
    _require("transformers", "train")
    from gpuplan.adapters.bench.train.config import TrainBenchConfig
    from gpuplan.adapters.bench.train.runner import run_train_bench

    config = TrainBenchConfig.model_validate(
        {
            "model": model,
            "batch_sizes": _ints(batch_sizes, "--batch-sizes"),
            "seq_len": seq_len,
            "method": method,
            "device": device,
            "dtype": dtype,
            "steps": steps,
            "warmup_steps": warmup_steps,
            "lora_rank": lora_rank,
            "gradient_checkpointing": gradient_checkpointing,
        }
    )
    summary = run_train_bench(config, store, on_result=_progress, announce=announce)
    if shape == "json":
        render.emit_json(summary)
        return
    _train_table(summary, model, seq_len)


def _train_table(summary: dict[str, Any], model: str, seq_len: int) -> None:
    rows = [
        [
            r["batch_size"],
            r["status"],
            r["value"],
            r["tokens_per_s"],
            r["achieved_tflops"],
            r["peak_memory_bytes"] / 2**30 if r["peak_memory_bytes"] else None,
            r.get("reason") or "",
        ]
        for r in summary["results"]
    ]
    render.table(
        f"{model} on {summary['device_name']} ({summary['dtype']}, seq {seq_len})",
        ["batch", "status", "step s", "tokens/s", "model TFLOP/s", "peak GiB", "note"],
        rows,
    )


@app.command("calibrate")
@guarded
def calibrate(
    results: Annotated[Path | None, typer.Argument(help="results CSV (kind,gpu,metric,value,...)")] = None,
    from_store: Annotated[bool, typer.Option("--from-store", help="read the results store")] = False,
    run: Annotated[list[str] | None, typer.Option("--run", help="only these run ids (repeatable)")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the profile YAML here")] = None,
    base: Annotated[Path | None, typer.Option(help="start from this profile (default: bundled)")] = None,
    gpu: Annotated[str | None, typer.Option(help="serving runs: the server's GPU")] = None,
    engine: Annotated[
        str | None, typer.Option(help="serving runs: the engine (vllm, sglang, trtllm …)")
    ] = None,
    tp: Annotated[int, typer.Option(help="serving runs: tensor-parallel degree")] = 1,
    weight_dtype: Annotated[str | None, typer.Option(help="serving runs: weight dtype")] = None,
    rows_out: Annotated[Path | None, typer.Option(help="also write the rows used, as CSV")] = None,
    store: StoreOpt = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Fit the model's efficiency factors to measured results; print the error before vs after."""
    from gpuplan.usecases.calibration.calibrate import calibrate_rows, gather_rows

    shape = fmt(format)
    check_deployment(catalog, gpu=gpu, engine=engine, tp=tp, weight_dtype=weight_dtype)
    deployment = {"gpu": gpu, "engine": engine, "tp": tp, "num_gpus": tp, "weight_dtype": weight_dtype}
    rows, notes, data = gather_rows(results, from_store, store, tuple(run or ()), deployment)
    if rows_out is not None:
        from gpuplan.usecases.calibration.measured_rows import rows_to_csv

        rows_out.write_text(rows_to_csv(rows), encoding="utf-8")
    outcome = calibrate_rows(
        rows,
        catalog_from(catalog),
        base=base,
        data=data,
        output=output,
        command="gpuplan " + " ".join(sys.argv[1:]),
        notes=tuple(notes),
    )
    if outcome["nothing_predicted"]:  # no profile is written: it would be the starting one
        raise UserInputError(
            outcome["nothing_predicted"],
            hint="gpuplan calibrate --rows-out rows.csv shows the rows' conditions",
        )
    outcome["skipped_runs"] = notes
    if shape == "json":
        render.emit_json(outcome)
        return
    _calibration_tables(outcome)


def check_deployment(
    catalog: CatalogOpt, *, gpu: str | None, engine: str | None, tp: int, weight_dtype: str | None
) -> None:
    """The serving-run flags name a real GPU, engine and dtype, and tp >= 1 (they label measurements)."""
    from gpuplan.core.dtypes import get_dtype
    from gpuplan.core.perf.engine_profiles import get_engine

    if tp < 1:
        raise UserInputError(f"--tp must be >= 1, got {tp}", hint="e.g. --tp 1")
    checks = (("--gpu", gpu, catalog_from(catalog).get_gpu), ("--engine", engine, get_engine))
    for flag, value, check in (*checks, ("--weight-dtype", weight_dtype, get_dtype)):
        if value is None:
            continue
        try:
            check(value)
        except GpuplanError as exc:  # "unknown GPU 'NOPE' …" → "--gpu: unknown GPU 'NOPE' …"
            raise UserInputError(f"{flag}: {exc.message}", hint=exc.hint) from None


def _calibration_tables(o: dict[str, Any]) -> None:
    render.table(
        "prediction error (mean |predicted/measured - 1|)",
        ["kind", "rows", "predicted", "before", "after"],
        [
            [e["kind"], e["rows"], e["predicted"], _pct(e["mape_before"]), _pct(e["mape_after"])]
            for e in o["errors"]
        ],
    )
    render.table(
        "fitted factors",
        ["factor", "before", "after"],
        [[f["factor"], f["before"], f["after"]] for f in o["factors"]],
    )
    if o["training_mfu"]:
        before = o["training_mfu_before"]
        render.lines(
            [f"{k}: {before[k]:.3f} -> {v:.3f}" for k, v in o["training_mfu"].items()],
            title="training MFU (solved through the step model; one factor per GPU family and dtype)",
        )
    if o["skipped_runs"]:
        render.lines(o["skipped_runs"], title="runs left out")
    if o["profile"]:
        render.console.print(f"profile written to {o['profile']}", highlight=False)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"

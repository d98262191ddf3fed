"""Side-by-side accuracy of NVIDIA aiconfigurator and gpuplan on the published inference rows.

Run from the repository root, with aiconfigurator installed in a throwaway virtualenv (it is
never a gpuplan dependency):

    python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install aiconfigurator
    /tmp/peervenv/bin/python benchmarks/peers/compare_aiconfigurator.py [CSV] [--jobs N] [--offline-max-batch N]

CSV defaults to ../shared/validation/inference.csv (relative to the repository root). Only
quality A/B rows of the scenarios offline, static_batch, concurrency and single are considered.
gpuplan's numbers come from ``.venv/bin/gpuplan validate CSV --format json``, joined by row id
and reported on exactly the rows aiconfigurator covered. The output is markdown on stdout.

How a row is put to aiconfigurator (its SILICON per-kernel database, no GPU needed):
* static_batch, single -> ``cli_estimate(mode="static", batch_size=B)`` (batch 1 for single):
  one prefill of the batch, then decode. tokens/s = B*osl/request latency. A ``single`` row
  with no prompt length (decode-speed test) is asked at isl=8 and read as 1000/TPOT.
* concurrency C -> ``cli_estimate(mode="agg", batch_size=C, ctx_tokens=T)``: aiconfigurator's
  steady-state in-flight-batching step model with C requests in flight. T, the per-step
  context-token budget, is TensorRT-LLM's default max_num_tokens 8192, snapped down to whole
  prompts and to at most C-1 prompts per step (aiconfigurator's own sweep guard).
* offline -> aiconfigurator's agg sweep (``Task`` + ``sweep_agg``) at the row's fixed TP/PP with
  no TTFT/TPOT limit: its batch grid up to 1024 x its context-token grid; the highest tokens/s
  is the prediction, times the number of replicas (num_gpus / (tp*pp)).
* Blank tp: every TP in {1,2,4,8} dividing num_gpus is tried; blank ep on MoE models: pure TP
  and pure EP experts are tried. The best value wins (highest throughput, lowest latency), as
  the validation README asks of a tool when the source gives no layout.
* dtype: fp16/bf16 -> bfloat16 GEMM/KV, fp8 -> fp8 (per-tensor) GEMM/MoE, fp4 -> nvfp4,
  int4 -> int4 weight-only. Blank kv_dtype -> fp8 KV when weights are fp8/fp4, else bfloat16.
* --offline-max-batch N (sensitivity only) appends batch sizes 1536..N (step 512) to that grid.
* Models: aiconfigurator's bundled config where it has the same architecture, else the config in
  shared/models written to /tmp/aic_models/<name>/config.json.
Rows aiconfigurator cannot express are "not covered" with the reason (framework it does not
model, GPU without a silicon database, unsupported architecture, missing lengths, ...).

Written against aiconfigurator 0.12.0: ``Task``/``sweep_agg`` are deprecated there (slated to move
to the ``aisimulate`` package in 0.13), so pin ``aiconfigurator==0.12.0`` to reproduce.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import io
import json
import logging
import os
import shlex
import statistics
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from aiconfigurator.sdk.models import check_is_moe
from aiconfigurator.sdk.perf_database import get_latest_database_version

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CSV = REPO.parent / "shared" / "validation" / "inference.csv"
MODELS_DIR = REPO.parent / "shared" / "models"
LOCAL_MODELS = Path("/tmp/aic_models")
SCENARIOS = ("offline", "static_batch", "concurrency", "single")
SYSTEMS = {  # dataset GPU -> aiconfigurator system
    "H100-SXM": "h100_sxm",
    "H200-SXM": "h200_sxm",
    "B200": "b200_sxm",
    "A100-80GB-SXM": "a100_sxm",
    "A100-80GB-PCIe": "a100_pcie",
    "H100-PCIe": "h100_pcie",
    "L40S": "l40s",
    "L4": "l4",
}
BACKENDS = ("trtllm", "vllm", "sglang")
SAME_ARCH = {  # dataset model -> aiconfigurator's bundled config of the identical architecture
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B": "meta-llama/Meta-Llama-3.1-405B",
}
GEMM = {"fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4", "int4": "int4_wo"}
MOE = {"fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4", "int4": "int4_wo"}
KV = {"fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8", "int8": "int8"}
MAX_NUM_TOKENS = 8192  # TensorRT-LLM's default per-step token budget
OFFLINE_MAX_BATCH = 1024  # the top of aiconfigurator's agg batch schedule; --offline-max-batch extends it


Layout = tuple[int, int, int | None, int | None, int]  # tp, pp, moe_tp, moe_ep, replicas
OOM_REASON = "aiconfigurator raises OOM: weights + KV of the requested batch do not fit (no queueing model)"


class NotCovered(Exception):
    """The row cannot be put to aiconfigurator; the message is the reason."""


@dataclass(frozen=True)
class Outcome:
    id: str
    predicted: float | None
    reason: str | None
    how: str = ""


def _init_worker(offline_max_batch: int) -> None:
    global OFFLINE_MAX_BATCH
    OFFLINE_MAX_BATCH = offline_max_batch
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)


def _int(row: dict[str, str], key: str) -> int | None:
    return int(float(row[key])) if row.get(key) else None


def model_path(hf_id: str) -> str:
    """aiconfigurator model argument: its bundled HF id, or a local dir with a config.json."""
    from aiconfigurator_core.sdk.common import DefaultHFModels
    from aiconfigurator_core.sdk.utils import _get_model_config_path

    alias = SAME_ARCH.get(hf_id, hf_id)
    if alias in DefaultHFModels:
        return alias
    bundled = Path(str(_get_model_config_path())) / f"{alias.replace('/', '--')}_config.json"
    ours = MODELS_DIR / f"{hf_id.replace('/', '__')}.json"
    source = bundled if bundled.exists() else ours
    if not source.exists():
        raise NotCovered(f"no config for {hf_id}")
    config = {k: v for k, v in json.loads(source.read_text()).items() if not k.startswith("_")}
    target = LOCAL_MODELS / alias.replace("/", "--")
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    return str(target)


def _layouts(row: dict[str, str], is_moe: bool) -> list[Layout]:
    """(tp, pp, moe_tp, moe_ep, replicas) candidates for the row."""
    gpus = _int(row, "num_gpus") or 1
    pp = _int(row, "pp") or 1
    tps = [t] if (t := _int(row, "tp")) else [t for t in (1, 2, 4, 8) if gpus % t == 0]
    out: list[Layout] = []
    for tp in tps:
        if gpus % (tp * pp):
            continue
        replicas = gpus // (tp * pp)
        if not is_moe:
            out.append((tp, pp, None, None, replicas))
        elif ep := _int(row, "ep"):
            out.append((tp, pp, tp // ep, ep, replicas))
        else:
            out += [(tp, pp, tp, 1, replicas)] + ([(tp, pp, 1, tp, replicas)] if tp > 1 else [])
    return out


def _quant(row: dict[str, str]) -> dict[str, str]:
    w, kv = row["weight_dtype"], row["kv_dtype"]
    if w not in GEMM:
        raise NotCovered(f"weight dtype '{w or 'blank'}' has no aiconfigurator quant mode")
    kv_mode = KV.get(kv) if kv else ("fp8" if w in ("fp8", "fp4") else "bfloat16")
    if kv_mode is None:
        raise NotCovered(f"kv dtype {kv} has no aiconfigurator quant mode")
    return {"gemm_quant_mode": GEMM[w], "moe_quant_mode": MOE[w], "kvcache_quant_mode": kv_mode}


def _pick(metric: str, values: list[float]) -> float:
    return max(values) if "per_s" in metric else min(values)


def _offline(
    model: str, system: str, backend: str, row: dict[str, str], layout: Layout, quant: dict[str, str]
) -> tuple[float, str]:
    from aiconfigurator.sdk import common, sweep
    from aiconfigurator.sdk.sweep import sweep_agg
    from aiconfigurator.sdk.task_v2 import Task

    tp, pp, moe_tp, moe_ep, replicas = layout
    task = Task(
        serving_mode="agg",
        model_path=model,
        system_name=system,
        backend_name=backend,
        isl=int(row["input_len"]),
        osl=int(row["output_len"]),
        ttft=1e12,
        tpot=1e12,
        pareto_sweep=False,
        total_gpus=tp * pp,
        agg_num_gpu_candidates=[tp * pp],
        agg_tp_candidates=[tp],
        agg_pp_candidates=[pp],
        agg_dp_candidates=[1],
        agg_moe_tp_candidates=[moe_tp] if moe_tp else None,
        agg_moe_ep_candidates=[moe_ep] if moe_ep else None,
        gemm_quant_mode=common.GEMMQuantMode[quant["gemm_quant_mode"]],
        moe_quant_mode=common.MoEQuantMode[quant["moe_quant_mode"]],
        kvcache_quant_mode=common.KVCacheQuantMode[quant["kvcache_quant_mode"]],
    )
    task.validate()
    database = task._load_database(system, backend, task.backend_version)
    grid = sweep._DEFAULT_AGG_BATCH_SCHEDULE
    extra = [b for b in range(1536, OFFLINE_MAX_BATCH + 1, 512) if b > max(grid)]
    sweep._DEFAULT_AGG_BATCH_SCHEDULE = grid + extra  # only with --offline-max-batch > 1024
    try:
        frame = sweep_agg(**task.sweep_agg_kwargs(database=database), max_batch_size=OFFLINE_MAX_BATCH)
    finally:
        sweep._DEFAULT_AGG_BATCH_SCHEDULE = grid
    column = "tokens/s/gpu" if row["metric"].endswith("_per_gpu") else "tokens/s"
    best = frame.loc[frame[column].idxmax()]
    cap = " (grid top)" if int(best["bs"]) >= OFFLINE_MAX_BATCH else ""
    note = f"{best['parallel']} bs={int(best['bs'])}{cap} ctx={int(best['ctx_tokens'])} x{replicas}"
    return float(best[column]) * (1 if column == "tokens/s/gpu" else replicas), note


def _point(
    model: str, system: str, backend: str, row: dict[str, str], layout: Layout, quant: dict[str, str]
) -> tuple[float, str]:
    from aiconfigurator.cli.api import cli_estimate

    tp, pp, moe_tp, moe_ep, replicas = layout
    scenario, metric = row["scenario"], row["metric"]
    if replicas != 1:
        raise NotCovered(f"{scenario} on {replicas} replicas is not mapped")
    isl, osl = _int(row, "input_len"), _int(row, "output_len")
    decode_speed = scenario == "single" and not isl and bool(osl)
    if decode_speed:
        isl = 8  # "a few tokens" of prompt
    if not isl or not osl:
        raise NotCovered("input/output length not stated")
    common_args = dict(
        backend_name=backend,
        isl=isl,
        osl=osl,
        tp_size=tp,
        pp_size=pp,
        moe_tp_size=moe_tp,
        moe_ep_size=moe_ep,
        **quant,
    )
    if scenario == "concurrency":
        conc = _int(row, "concurrency") or 1
        prompts = max(1, min(MAX_NUM_TOKENS // isl, conc - 1))
        result = cli_estimate(
            model, system, mode="agg", batch_size=conc, ctx_tokens=prompts * isl, **common_args
        )
    else:
        batch = _int(row, "batch_size") or 1
        result = cli_estimate(model, system, mode="static", batch_size=batch, **common_args)
    note = f"{result.raw['parallel']} {result.mode} bs={result.batch_size}"
    note += " OOM-warning" if result.kv_cache_warning else ""
    if metric.startswith("tpot") and osl < 2:
        raise NotCovered("TPOT of a one-token answer")
    return _read(result, metric, decode_speed), note + (" 1000/TPOT" if decode_speed else "")


def _read(result: Any, metric: str, decode_speed: bool) -> float:
    """The row's metric from an aiconfigurator EstimateResult."""
    if metric.startswith("ttft"):
        return float(result.ttft)
    if metric.startswith("tpot"):
        return float(result.tpot)
    if decode_speed:
        return 1000.0 / float(result.tpot)
    if metric == "output_tokens_per_s_per_gpu":
        return float(result.tokens_per_second_per_gpu)
    if metric == "output_tokens_per_s":
        return float(result.tokens_per_second)
    raise NotCovered(f"metric {metric} not mapped")


def _system(row: dict[str, str]) -> str:
    """aiconfigurator system of the row's GPU, if it has a silicon database for the row's engine."""
    if row["framework"] not in BACKENDS:
        raise NotCovered(f"framework {row['framework']} is not modelled (trtllm/vllm/sglang only)")
    system = SYSTEMS.get(row["gpu"])
    if system is None:
        raise NotCovered(f"GPU {row['gpu']} has no aiconfigurator system")
    if get_latest_database_version(system=system, backend=row["framework"]) is None:
        raise NotCovered(f"no silicon database for {system}/{row['framework']}")
    if row["scenario"] == "offline" and not (row["input_len"] and row["output_len"]):
        raise NotCovered("input/output length not stated")
    return system


def predict_row(row: dict[str, str]) -> Outcome:
    """aiconfigurator's value for one row, or the reason it is not covered."""
    try:
        system = _system(row)
        model = model_path(row["model"])
        try:
            is_moe = check_is_moe(model)
        except Exception as exc:  # unsupported architectures fail here
            raise NotCovered(str(exc).split(". Supported")[0][:120]) from exc
        quant = _quant(row)
        fn = _offline if row["scenario"] == "offline" else _point
        values: list[tuple[float, str]] = []
        errors: list[str] = []
        for layout in _layouts(row, is_moe):
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    values.append(fn(model, system, row["framework"], row, layout, quant))
            except NotCovered:
                raise
            except Exception as exc:
                text = str(exc).splitlines()[0]
                oom = text.startswith("OOM")
                errors.append(OOM_REASON if oom else f"{type(exc).__name__}: {text[:100]}")
        if not values:
            raise NotCovered(errors[0] if errors else "no layout")
        best = _pick(row["metric"], [v for v, _ in values])
        return Outcome(row["id"], best, None, next(n for v, n in values if v == best))
    except NotCovered as why:
        return Outcome(row["id"], None, str(why))


def gpuplan_rows(csv_path: Path) -> dict[str, dict[str, Any]]:
    exe = REPO / ".venv" / "bin" / "gpuplan"
    out = subprocess.run(
        [str(exe), "validate", str(csv_path), "--format", "json"], check=True, capture_output=True, text=True
    ).stdout
    return {r["id"]: r for r in json.loads(out)["rows"]}


def metric_group(metric: str) -> str:
    if "per_s" in metric:
        return "throughput"
    return "TTFT" if metric.startswith("ttft") else "TPOT" if metric.startswith("tpot") else "other"


def _fmt(apes: list[float]) -> str:
    return f"{100 * statistics.median(apes):.1f}% / {100 * statistics.fmean(apes):.1f}%" if apes else "n/a"


def report(rows: list[dict[str, str]], outcomes: dict[str, Outcome], gp: dict[str, dict[str, Any]]) -> str:
    lines: list[str] = []
    covered = [r for r in rows if outcomes[r["id"]].predicted is not None]

    def ape_aic(r: dict[str, str]) -> float:
        return abs((outcomes[r["id"]].predicted or 0.0) / float(r["value"]) - 1.0)

    def ape_gp(r: dict[str, str]) -> float | None:
        g = gp.get(r["id"])
        return float(g["ape"]) if g and g.get("ape") is not None else None

    both = [r for r in covered if ape_gp(r) is not None]
    lines += ["## Coverage", "", "| scenario | A+B rows | covered by aiconfigurator |", "|---|---:|---:|"]
    for sc in SCENARIOS:
        n = [r for r in rows if r["scenario"] == sc]
        lines.append(f"| {sc} | {len(n)} | {sum(outcomes[r['id']].predicted is not None for r in n)} |")
    lines += [
        f"| **all** | {len(rows)} | {len(covered)} ({100 * len(covered) / max(len(rows), 1):.0f}%) |",
        "",
    ]
    gp_all = [g["ape"] for r in rows if (g := gp.get(r["id"])) and g.get("ape") is not None]
    lines += [
        f"gpuplan on all {len(gp_all)} A+B rows of these scenarios that it predicts: "
        f"median APE / MAPE {_fmt(gp_all)}.",
        "",
    ]
    lines += [
        f"gpuplan predicts {len(both)} of the {len(covered)} covered rows; the tables below use those "
        f"{len(both)} rows for both tools. Cells are median APE / MAPE, APE = |pred/measured - 1|.",
        "",
    ]

    def table(title: str, key: Callable[[dict[str, str]], str], fixed: tuple[str, ...] = ()) -> None:
        groups: defaultdict[str, list[dict[str, str]]] = defaultdict(list, {name: [] for name in fixed})
        for r in both:
            groups[key(r)].append(r)
        groups["**all**"] = both
        lines.extend(
            [f"## {title}", "", "| group | rows | aiconfigurator | gpuplan |", "|---|---:|---:|---:|"]
        )
        for name, rs in sorted(groups.items(), key=lambda kv: (kv[0] == "**all**", kv[0])):
            lines.append(
                f"| {name} | {len(rs)} | {_fmt([ape_aic(r) for r in rs])} | {_fmt([ape_gp(r) or 0.0 for r in rs])} |"
            )
        lines.append("")

    table("By metric group", lambda r: metric_group(r["metric"]), ("throughput", "TTFT", "TPOT"))
    table("By GPU", lambda r: r["gpu"])
    table("By scenario", lambda r: r["scenario"])
    reasons = Counter(outcomes[r["id"]].reason for r in rows if outcomes[r["id"]].predicted is None)
    lines += ["## Not covered", "", "| reason | rows |", "|---|---:|"]
    lines += [f"| {why} | {n} |" for why, n in reasons.most_common()] + [""]
    top = sum("(grid top)" in outcomes[r["id"]].how for r in covered)
    lines += [f"Offline rows whose best aiconfigurator point is at the top of its batch grid: {top}.", ""]
    lines += [
        "## Per row",
        "",
        "| id | scenario | model | gpu | tp | metric | measured | aiconfigurator | APE "
        "| gpuplan | APE | aiconfigurator point |",
        "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in covered:
        g, ga = gp.get(r["id"], {}), ape_gp(r)
        gpred = f"{g['predicted']:.4g}" if g.get("predicted") is not None else "skip"
        lines.append(
            f"| {r['id']} | {r['scenario']} | {r['model'].split('/')[-1]} | {r['gpu']} | {r['tp']} | "
            f"{r['metric']} | {float(r['value']):.4g} | {outcomes[r['id']].predicted:.4g} | "
            f"{100 * ape_aic(r):.0f}% | "
            f"{gpred} | {'' if ga is None else f'{100 * ga:.0f}%'} | {outcomes[r['id']].how} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument(
        "--offline-max-batch",
        type=int,
        default=OFFLINE_MAX_BATCH,
        help="extend aiconfigurator's offline batch grid past 1024 in steps of 512",
    )
    args = parser.parse_args()
    with args.csv.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["quality"] in ("A", "B") and r["scenario"] in SCENARIOS]
    with ProcessPoolExecutor(args.jobs, initializer=_init_worker, initargs=(args.offline_max_batch,)) as pool:
        outcomes = {o.id: o for o in pool.map(predict_row, rows)}
    gp = gpuplan_rows(args.csv)
    command = "/tmp/peervenv/bin/python " + " ".join(shlex.quote(a) for a in sys.argv)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"# aiconfigurator {metadata.version('aiconfigurator')} vs gpuplan on {args.csv.name} (A+B rows)\n")
    print(
        f"- date: {args.date}\n- command: `{command}`\n- aiconfigurator-core "
        f"{metadata.version('aiconfigurator-core')}, database mode SILICON (bundled per-kernel data), "
        f"offline batch grid up to {args.offline_max_batch}\n- gpuplan: `.venv/bin/gpuplan validate` at commit "
        f"{commit}\n- mapping: see the docstring of benchmarks/peers/compare_aiconfigurator.py\n"
    )
    print(report(rows, outcomes, gp))


if __name__ == "__main__":
    main()

"""Side-by-side accuracy of llm-analysis (roofline, peer tool) and gpuplan on published training rows.

For every quality A/B row of ``shared/validation/training.csv`` whose metric is a throughput or
step time, predict the metric with llm-analysis's ``LLMAnalysis.training`` (flops_efficiency 0.5,
hbm_memory_efficiency 0.5) where llm-analysis can express the run: a dense decoder in BF16, full
training (pretrain / full fine-tune), no context parallelism. Everything else is counted as not
covered, with the reason. gpuplan's numbers come from ``gpuplan validate --format json`` and are
joined by row id, so both tools are scored on the same rows.

llm-analysis is NOT a gpuplan dependency. Run it from a throwaway virtualenv:

    python3 -m venv /tmp/peervenv2
    /tmp/peervenv2/bin/pip install llm-analysis==0.2.2
    /tmp/peervenv2/bin/python benchmarks/peers/compare_llm_analysis.py [--rows] [--blank-dtype-as-bf16]

Model configs (HF config.json) and GPU specs (YAML) are read from gpuplan's bundled data.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import statistics
import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml
from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.logger import logger as la_logger

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "src" / "gpuplan"
CSV = REPO.parent / "shared" / "validation" / "training.csv"
GPUPLAN = REPO / ".venv" / "bin" / "gpuplan"
METRICS = ("tokens_per_s_per_gpu", "step_time_s", "tflops_per_gpu", "samples_per_s", "tokens_per_s")
EFFICIENCY = 0.5  # "roofline at 0.5 efficiency": flops_efficiency and hbm_memory_efficiency
AC = {
    "": ActivationRecomputation.NONE,
    "none": ActivationRecomputation.NONE,
    "selective": ActivationRecomputation.SELECTIVE,
    "full": ActivationRecomputation.FULL,
}
# Sharding only changes llm-analysis's memory estimate, never its training time.
ZERO = {
    "llm-foundry": DSZeRO.STAGE_3,
    "torchtitan": DSZeRO.STAGE_3,
    "pytorch-fsdp": DSZeRO.STAGE_3,
    "nemo-automodel": DSZeRO.STAGE_3,
    "nemo": DSZeRO.STAGE_1,
    "megatron-bridge": DSZeRO.STAGE_1,
    "megatron-core": DSZeRO.STAGE_1,
    "megatron-lm": DSZeRO.STAGE_1,
}


@dataclass
class Result:
    row: dict[str, str]
    pred: float | None = None
    reason: str | None = None

    @property
    def ape(self) -> float | None:
        return None if self.pred is None else abs(self.pred / float(self.row["value"]) - 1)


def model_file(hf_id: str) -> Path:
    cfg = DATA / "data" / "models"
    with open(cfg / "aliases.csv") as f:
        hf_id = {r["alias"]: r["hf_id"] for r in csv.DictReader(f)}.get(hf_id, hf_id)
    with open(cfg / "configs" / "INDEX.csv") as f:
        files = {r["hf_id"]: r["file"] for r in csv.DictReader(f)}
    return cfg / "configs" / files[hf_id]


def model_config(hf_id: str, seq_len: int) -> tuple[ModelConfig | None, bool, str | None]:
    """llm-analysis ModelConfig from an HF config.json; (config, gated_mlp, reason-if-not-expressible)."""
    c: dict[str, Any] = json.loads(model_file(hf_id).read_text())
    if any(k in c for k in ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")):
        return None, False, "MoE"
    if (
        "mamba" in json.dumps(c.get("hybrid_override_pattern", "")).lower()
        or c.get("model_type") == "nemotron_h"
    ):
        return None, False, "hybrid Mamba"
    hidden = c.get("hidden_size") or c.get("d_model") or c["n_embd"]
    ffn = c.get("intermediate_size") or c.get("ffn_hidden_size") or hidden * c.get("expansion_ratio", 4)
    gated = c.get("hidden_act", c.get("activation_function", "")) in ("silu", "swiglu")
    # llm-analysis counts 2 MLP matrices; 1.5x ffn keeps a SwiGLU model's parameter count right.
    # (Its MLP FLOPs are a fixed 16*b*s*h^2 whatever ffn is.)
    ffn_eff = int(ffn * 1.5) if gated else ffn
    heads = c.get("num_attention_heads") or c["n_heads"]
    cfg = ModelConfig(
        name=hf_id,
        num_layers=c.get("num_hidden_layers") or c["n_layers"],
        n_head=heads,
        hidden_dim=hidden,
        vocab_size=c["vocab_size"],
        max_seq_len=seq_len,
        num_key_value_heads=c.get("num_key_value_heads") or heads,
        ffn_embed_dim=ffn_eff,
        expansion_ratio=ffn_eff / hidden,
        model_type=c.get("model_type"),
    )
    return cfg, gated, None


def gpu_config(gpu: str) -> GPUConfig:
    g: dict[str, Any] = yaml.safe_load(
        (DATA / "data" / "catalog" / "gpus" / f"{gpu.lower()}.yaml").read_text()
    )
    ic = g.get("interconnect") or {}
    link: float = ic.get("scale_up_bytes_per_s") or ic.get("pcie_bytes_per_s") or 0.0
    return GPUConfig(
        name=gpu,
        mem_per_GPU_in_GB=g["memory_bytes"] / 1e9,
        hbm_bandwidth_in_GB_per_sec=g["memory_bandwidth_bytes_per_s"] / 1e9,
        # llm-analysis's own configs use one-way NVLink bandwidth (H100 450 GB/s)
        intra_node_bandwidth_in_GB_per_sec=link / 2e9,
        intra_node_min_message_latency=8e-6,
        peak_fp16_TFLOPS=g["dense_tflops"]["bf16"],
    )


def _int(s: str) -> int | None:
    return int(s) if s else None


def predict(row: dict[str, str], blank_dtype_as_bf16: bool) -> Result:
    dtype = row["dtype"] or ("bf16" if blank_dtype_as_bf16 else "")
    if row["method"] not in ("pretrain", "full_ft"):
        return Result(row, reason=f"{row['method']} (no adapters in llm-analysis)")
    if dtype != "bf16":
        return Result(row, reason=f"precision {dtype or 'not stated'}")
    if (_int(row["cp"]) or 1) > 1:
        return Result(row, reason="context parallel")
    if (_int(row["ep"]) or 1) > 1:
        return Result(row, reason="MoE")
    seq = int(row["seq_len"])
    model, gated, why = model_config(row["model"], seq)
    if model is None:
        return Result(row, reason=why)
    n = int(row["num_gpus"])
    tp, pp = _int(row["tp"]) or 1, _int(row["pp"]) or 1  # blank layout: tp=pp=1 (time does not depend on it)
    dp = _int(row["dp"]) or n // (tp * pp)
    mbs = _int(row["micro_batch_size"])
    gbs = _int(row["global_batch_size"]) or (mbs or 1) * dp
    if mbs is None or gbs % (mbs * dp):
        if gbs % dp:
            return Result(row, reason="global batch not divisible by dp")
        mbs = gbs // dp
    la = LLMAnalysis(
        model,
        gpu_config(row["gpu"]),
        DtypeConfig(),
        ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp),
        flops_efficiency=EFFICIENCY,
        hbm_memory_efficiency=EFFICIENCY,
    )
    s = la.training(
        batch_size_per_gpu=mbs,
        gradient_accumulation_steps=gbs // (mbs * dp),
        global_batch_size=gbs,
        seq_len=seq,
        activation_recomputation=AC[row["activation_checkpointing"]],
        ds_zero=ZERO.get(row["framework"], DSZeRO.NONE),
        mlp_gated_linear_units=gated,
    )
    step = s["latency_per_iter"]
    model_flops = 3 * la.get_num_flops_fwd_total(mbs, seq) * gbs // mbs  # fwd+bwd, no recompute
    pred = {
        "step_time_s": step,
        "samples_per_s": gbs / step,
        "tokens_per_s": gbs * seq / step,
        "tokens_per_s_per_gpu": gbs * seq / step / n,
        "tflops_per_gpu": model_flops / step / n / 1e12,
    }
    return Result(row, pred=pred[row["metric"]])


def stats(apes: list[float]) -> str:
    if not apes:
        return "– | –"
    return f"{100 * statistics.median(apes):.1f} % | {100 * statistics.fmean(apes):.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--gpuplan", type=Path, default=GPUPLAN)
    ap.add_argument("--rows", action="store_true", help="also print one line per covered row")
    ap.add_argument(
        "--blank-dtype-as-bf16", action="store_true", help="cover rows whose precision is not stated"
    )
    args = ap.parse_args()
    la_logger.setLevel(logging.ERROR)

    with open(args.csv) as f:
        rows = [r for r in csv.DictReader(f) if r["quality"] in ("A", "B") and r["metric"] in METRICS]
    gp_json = subprocess.run(
        [str(args.gpuplan), "validate", str(args.csv), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    gp = {r["id"]: r for r in json.loads(gp_json)["rows"]}
    res = [predict(r, args.blank_dtype_as_bf16) for r in rows]
    cov = [x for x in res if x.pred is not None]

    def gp_apes(sel: list[dict[str, str]]) -> list[float]:
        return [gp[r["id"]]["ape"] for r in sel if gp.get(r["id"], {}).get("ape") is not None]

    share = 100 * len(cov) / len(res)
    print(f"Coverage: llm-analysis expresses {len(cov)} of {len(res)} A+B rows ({share:.0f} %).\n")
    print(
        "| metric | A+B rows | covered | llm-analysis median APE | llm-analysis MAPE "
        "| gpuplan median APE (same rows) | gpuplan MAPE (same rows) "
        "| gpuplan median APE (all rows) | gpuplan MAPE (all rows) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in (*METRICS, "all"):
        rs = [x for x in res if m in ("all", x.row["metric"])]
        cs = [x for x in rs if x.pred is not None]
        if not rs:
            continue
        print(
            f"| {m} | {len(rs)} | {len(cs)} | {stats([x.ape for x in cs])} "  # type: ignore[misc]
            f"| {stats(gp_apes([x.row for x in cs]))} | {stats(gp_apes([x.row for x in rs]))} |"
        )
    reasons: dict[str, int] = {}
    for x in res:
        if x.reason:
            reasons[x.reason] = reasons.get(x.reason, 0) + 1
    print(
        "\nNot covered: " + "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))
    )
    if args.rows:
        print("\n| id | framework | model | gpu | metric | measured | llm-analysis | APE | gpuplan | APE |")
        print("|---|---|---|---|---|---:|---:|---:|---:|---:|")
        for x in cov:
            g, r = gp.get(x.row["id"], {}), x.row
            la_ape, gp_ape = x.ape or 0.0, g.get("ape") or 0.0
            print(
                f"| {r['id']} | {r['framework']} | {r['model']} | {r['gpu']} | {r['metric']} | {r['value']} "
                f"| {x.pred:.4g} | {100 * la_ape:.0f} % | {g.get('predicted') or 0:.4g} | {100 * gp_ape:.0f} % |"
            )
    print(
        f"\nllm-analysis {version('llm-analysis')}, "
        f"flops_efficiency={EFFICIENCY}, hbm_memory_efficiency={EFFICIENCY}"
    )


if __name__ == "__main__":
    main()

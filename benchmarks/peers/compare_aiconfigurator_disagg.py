"""Aggregated vs disaggregated (xPyD) serving: NVIDIA aiconfigurator's choice against gpuplan's.

Run from the repository root with gpuplan's own environment; aiconfigurator runs in a throwaway
virtualenv whose path is given (it is never a gpuplan dependency):

    python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install aiconfigurator==0.12.0
    .venv/bin/python benchmarks/peers/compare_aiconfigurator_disagg.py --peer-venv /tmp/peervenv
    .venv/bin/python benchmarks/peers/compare_aiconfigurator_disagg.py      # re-render from the raw file

With ``--peer-venv`` each case is put to ``aiconfigurator cli default`` (its Python twin
``aiconfigurator.cli.api.cli_default``, backend trtllm, SILICON database) and its answer is stored in
``benchmarks/peers/aiconfigurator_disagg_raw.json``; without it that file is read back. The markdown
table goes to stdout.

The question both tools are asked: on N GPUs of one type, at ISL/OSL tokens and mean TTFT/TPOT limits,
which serving layout carries the most output tokens/s per GPU, aggregated replicas or prefill/decode
pools? aiconfigurator answers it directly (``--total-gpus N``). gpuplan answers "the cheapest plan for a
target rate", so the rate is searched: per layout kind, the highest request rate at which
``core.recommend.search`` (what ``gpuplan recommend`` ranks) still finds a plan of that kind within
``--max-gpus N`` (doubling, then bisection to 0.1 %), on one GPU type and fp8 weights with the
trtllm engine. tokens/s/GPU = rate x OSL / N (idle GPUs count, as in aiconfigurator's
``tokens/s/gpu_cluster``). gpuplan's choice is the kind with the higher
tokens/s/GPU (aggregated on a tie, as its ranking does). This is done twice: with gpuplan's 0.85
queueing headroom (what a user gets) and with headroom 1.0 (the SLA-limited capacity, like for like with
aiconfigurator, which applies no headroom to aggregated replicas and its 0.9 / 0.92 rate-matching
factors to disaggregated pools).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.recommend.request import GpuOffer, LayoutKind, Plan, PoolPlan, SearchSpace
from gpuplan.core.recommend.search import search
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve

REPO = Path(__file__).resolve().parents[2]
RAW = Path(__file__).with_name("aiconfigurator_disagg_raw.json")
BISECTION_STEPS = 10
"""Halvings of the rate bracket [r, 2r]: 2^-10 < 0.1 % of the rate."""
HEADROOMS = (0.85, 1.0)
"""gpuplan's default queueing headroom (SearchSpace.headroom), and none."""


@dataclass(frozen=True)
class Case:
    """One question, posed identically to both tools."""

    name: str
    model: str  # gpuplan model id
    aic_model: str  # aiconfigurator model (its bundled HF id; fp8 checkpoints carry their quant config)
    gpu: str  # gpuplan GPU id
    system: str  # aiconfigurator system
    gpus: int
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float


QWEN, LLAMA70, DSV3 = "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B", "deepseek-ai/DeepSeek-V3"
QWEN_FP8, LLAMA70_FP8 = "Qwen/Qwen3-32B-FP8", "nvidia/Llama-3.1-70B-Instruct-FP8"
CASES = (
    Case("Qwen3-32B 8xH200 4000/500", QWEN, QWEN_FP8, "H200-SXM", "h200_sxm", 8, 4000, 500, 2000, 30),
    Case("Qwen3-32B 8xH200 1000/1000", QWEN, QWEN_FP8, "H200-SXM", "h200_sxm", 8, 1000, 1000, 2000, 30),
    Case(
        "Llama-3.1-70B 8xH200 8000/500", LLAMA70, LLAMA70_FP8, "H200-SXM", "h200_sxm", 8, 8000, 500, 2000, 20
    ),
    Case(
        "Llama-3.1-70B 8xH100 8000/500", LLAMA70, LLAMA70_FP8, "H100-SXM", "h100_sxm", 8, 8000, 500, 2000, 20
    ),
    Case("Llama-3.1-70B 8xH200 200/200", LLAMA70, LLAMA70_FP8, "H200-SXM", "h200_sxm", 8, 200, 200, 1000, 30),
    Case("Llama-3.1-70B 8xH100 200/200", LLAMA70, LLAMA70_FP8, "H100-SXM", "h100_sxm", 8, 200, 200, 1000, 30),
    Case("DeepSeek-V3 16xH200 4000/500", DSV3, DSV3, "H200-SXM", "h200_sxm", 16, 4000, 500, 2000, 50),
)

# Runs inside the peer venv: one case (JSON in argv[1]) -> aiconfigurator's answer (JSON on stdout).
AIC_SNIPPET = r"""
import contextlib, io, json, logging, math, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
from importlib import metadata
from aiconfigurator.cli.api import cli_default
c = json.loads(sys.argv[1])
keep = ("tokens/s/gpu_cluster", "tokens/s/gpu", "request_rate", "ttft", "tpot", "num_total_gpus", "tp", "pp",
        "dp", "moe_tp", "moe_ep", "bs", "(p)workers", "(p)tp", "(p)pp", "(p)dp", "(p)moe_tp", "(p)moe_ep",
        "(p)bs", "(d)workers", "(d)tp", "(d)pp", "(d)dp", "(d)moe_tp", "(d)moe_ep", "(d)bs",
        "(p)seq/s/worker", "(d)seq/s/worker", "seq/s", "concurrency", "tokens/s")
out = {"version": metadata.version("aiconfigurator"), "modes": {}}
try:
    with contextlib.redirect_stdout(io.StringIO()):
        r = cli_default(c["aic_model"], c["gpus"], c["system"], isl=c["isl"], osl=c["osl"],
                        ttft=c["ttft_ms"], tpot=c["tpot_ms"], backend="trtllm", top_n=3)
    out["chosen"] = r.chosen_exp
    for mode, df in r.best_configs.items():
        rows = df.head(3).to_dict("records") if df is not None else []
        out["modes"][mode] = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items() if k in keep}
            for row in rows
        ]
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
print(json.dumps(out, default=float))
"""


def run_aiconfigurator(venv: Path, case: Case) -> dict[str, Any]:
    """aiconfigurator's answer to ``case``: chosen mode and its top rows per mode."""
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", AIC_SNIPPET, json.dumps(asdict(case))],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}", "modes": {}}
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


@dataclass(frozen=True)
class GpuplanAnswer:
    """gpuplan's best plan of one layout kind within the case's GPUs (None: no plan at any rate)."""

    rate_rps: float
    plan: Plan | None

    def tokens_per_s_per_gpu(self, osl: int, gpus: int) -> float:
        """Output tokens/s over all ``gpus`` of the case, idle ones included (aiconfigurator's
        ``tokens/s/gpu_cluster``: its best unit's replicas that fit, divided by the total)."""
        return self.rate_rps * osl / gpus if self.plan else 0.0


class GpuplanSide:
    """gpuplan's search for one case, one GPU type, fp8 weights, engine trtllm."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.model: ModelSpec = get_model(case.model)
        self.offers: list[GpuOffer] = list(resolve.offers(default_catalog(), [case.gpu]))
        self.sla = Sla(ttft_ms=case.ttft_ms, tpot_ms=case.tpot_ms)
        self.cal = default_calibration()

    def space(self, kinds: tuple[LayoutKind, ...], headroom: float, max_gpus: int) -> SearchSpace:
        return SearchSpace(
            weight_dtypes=("fp8",), max_gpus=max_gpus, engine="trtllm", layout_kinds=kinds, headroom=headroom
        )

    def best(self, rate_rps: float, space: SearchSpace) -> Plan | None:
        """The plan with the fewest GPUs at ``rate_rps`` (ties: aggregated), or None."""
        target = Workload(
            scenario="rate", input_tokens=self.case.isl, output_tokens=self.case.osl, rate_rps=rate_rps
        )
        plans, _ = search(self.model, self.offers, target, self.sla, space, cal=self.cal)
        return min(plans, key=lambda p: (p.num_gpus, p.layout_kind != "aggregated"), default=None)

    def highest_rate(self, kind: LayoutKind, headroom: float) -> GpuplanAnswer:
        """The highest rate with a plan of ``kind`` within the case's GPUs, and that plan."""
        space = self.space((kind,), headroom, self.case.gpus)
        rate, plan = 0.125, self.best(0.125, space)
        if plan is None:
            return GpuplanAnswer(0.0, None)
        while (more := self.best(2 * rate, space)) is not None:
            rate, plan = 2 * rate, more
        lo, hi = rate, 2 * rate
        for _ in range(BISECTION_STEPS):
            mid = (lo + hi) / 2
            found = self.best(mid, space)
            lo, hi, plan = (mid, hi, found) if found is not None else (lo, mid, plan)
        return GpuplanAnswer(lo, plan)


def pool_shape(pool: PoolPlan) -> str:
    """``4xTP1`` or, with experts or attention DP, ``1xTP1EP8DP8``."""
    extra = (f"EP{pool.ep}" if pool.ep > 1 else "") + (
        f"DP{pool.attention_dp}" if pool.attention_dp > 1 else ""
    )
    return f"{pool.workers}xTP{pool.tp}{f'PP{pool.pp}' if pool.pp > 1 else ''}{extra}"


def gpuplan_shape(plan: Plan | None) -> str:
    if plan is None:
        return "none"
    if plan.prefill is not None and plan.decode is not None:
        return f"{pool_shape(plan.prefill)} P + {pool_shape(plan.decode)} D"
    lay = plan.layout
    extra = (f"EP{lay.ep}" if lay.ep > 1 else "") + (f"DP{lay.attention_dp}" if lay.attention_dp > 1 else "")
    return f"{lay.replicas}xTP{lay.tp}{f'PP{lay.pp}' if lay.pp > 1 else ''}{extra}"


def _worker(row: dict[str, Any], prefix: str) -> str:
    tp, pp, dp = (int(row.get(f"{prefix}{k}") or 1) for k in ("tp", "pp", "dp"))
    ep = int(row.get(f"{prefix}moe_ep") or 1)
    return f"TP{tp}{f'PP{pp}' if pp > 1 else ''}{f'EP{ep}' if ep > 1 else ''}{f'DP{dp}' if dp > 1 else ''}"


def aic_shape(mode: str, row: dict[str, Any] | None, gpus: int) -> str:
    """aiconfigurator's best row of a mode in the same notation (replicas of the xPyD unit in N GPUs)."""
    if row is None:
        return "none"
    if mode == "agg":
        per = int(row.get("num_total_gpus") or 1)
        return f"{gpus // per}x{_worker(row, '')}"
    unit = int(row.get("num_total_gpus") or 1)
    reps = gpus // unit
    shape = (
        f"{int(row['(p)workers'])}x{_worker(row, '(p)')} P + {int(row['(d)workers'])}x{_worker(row, '(d)')} D"
    )
    return shape if reps == 1 else f"{reps}x({shape})"


def aic_best(raw: dict[str, Any], mode: str) -> tuple[float, dict[str, Any] | None]:
    rows = raw.get("modes", {}).get(mode) or []
    return (float(rows[0]["tokens/s/gpu_cluster"]), rows[0]) if rows else (0.0, None)


def _choice(agg: float, disagg: float) -> str:
    if agg <= 0 and disagg <= 0:
        return "none"
    return "disagg" if disagg > agg else "agg"


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if ours > 0 and theirs > 0 else "n/a"


def _margin(agg: float, disagg: float) -> str:
    return f"{100 * (disagg / agg - 1):+.0f}%" if agg > 0 and disagg > 0 else "n/a"


def gpuplan_answers(case: Case) -> dict[float, dict[str, GpuplanAnswer]]:
    side = GpuplanSide(case)
    return {
        h: {kind: side.highest_rate(kind, h) for kind in ("aggregated", "disaggregated")} for h in HEADROOMS
    }


def case_rows(
    case: Case, raw: dict[str, Any], gp: dict[float, dict[str, GpuplanAnswer]]
) -> tuple[str, str, bool]:
    """The case's row in the main table, its row in the headroom-1 table, and whether the choices agree."""
    a_agg, a_agg_row = aic_best(raw, "agg")
    a_dis, a_dis_row = aic_best(raw, "disagg")
    a_choice = _choice(a_agg, a_dis)
    cells = []
    agree = False
    for h in HEADROOMS:
        g_agg = gp[h]["aggregated"].tokens_per_s_per_gpu(case.osl, case.gpus)
        g_dis = gp[h]["disaggregated"].tokens_per_s_per_gpu(case.osl, case.gpus)
        g_choice = _choice(g_agg, g_dis)
        agree = agree or (h == HEADROOMS[0] and g_choice == a_choice)
        cells.append(
            f"| {case.name} | {g_agg:.0f} {gpuplan_shape(gp[h]['aggregated'].plan)} "
            f"| {g_dis:.0f} {gpuplan_shape(gp[h]['disaggregated'].plan)} | {g_choice} {_margin(g_agg, g_dis)} "
            f"| {_ratio(g_agg, a_agg)} | {_ratio(g_dis, a_dis)} |"
        )
    aic = (
        f"| {case.name} | {case.ttft_ms:g}/{case.tpot_ms:g} | {a_agg:.0f} {aic_shape('agg', a_agg_row, case.gpus)} "
        f"| {a_dis:.0f} {aic_shape('disagg', a_dis_row, case.gpus)} | {a_choice} {_margin(a_agg, a_dis)} "
    )
    main = aic + cells[0].split(f"| {case.name} ", 1)[1] + f" {'yes' if agree else '**no**'} |"
    return main, cells[1], agree


def aic_cluster_rate_rps(raw: dict[str, Any], mode: str, gpus: int) -> float:
    """Requests/s of aiconfigurator's best row of ``mode`` over all its replicas within ``gpus``."""
    _, row = aic_best(raw, mode)
    if row is None:
        return 0.0
    return float(row["request_rate"]) * (gpus // int(row.get("num_total_gpus") or 1))


def at_aic_rate_row(case: Case, raw: dict[str, Any]) -> str:
    """gpuplan's cheapest plan (both kinds, up to 64 GPUs) at aiconfigurator's best aggregated rate."""
    rate = aic_cluster_rate_rps(raw, "agg", case.gpus)
    if rate <= 0:
        return f"| {case.name} | n/a | | | |"
    side = GpuplanSide(case)
    best = {
        kind: side.best(rate, side.space((kind,), HEADROOMS[0], 64))
        for kind in ("aggregated", "disaggregated")
    }
    gpus = {kind: plan.num_gpus if plan else 0 for kind, plan in best.items()}
    both = [p for p in best.values() if p is not None]
    top = min(both, key=lambda p: (p.num_gpus, p.layout_kind != "aggregated"), default=None)
    kind = "none" if top is None else top.layout_kind.replace("regated", "")
    return (
        f"| {case.name} | {rate:.2f} | {kind} {gpuplan_shape(top)} | {gpus['aggregated']} "
        f"({gpuplan_shape(best['aggregated'])}) | {gpus['disaggregated']} "
        f"({gpuplan_shape(best['disaggregated'])}) |"
    )


AT_AIC_RATE_HEAD = (
    "gpuplan's cheapest plan at aiconfigurator's best aggregated cluster rate (both kinds, up to 64 GPUs, "
    "headroom 0.85):",
    "",
    "| case | rate req/s | gpuplan's pick | aggregated GPUs | disaggregated GPUs |",
    "|---|---:|---|---|---|",
)
MAIN_HEAD = (
    "| case | TTFT/TPOT ms | aic agg tok/s/GPU | aic disagg tok/s/GPU | aic choice | gpuplan agg "
    "| gpuplan disagg | gpuplan choice | agg ratio gp/aic | disagg ratio gp/aic | agree |",
    "|---|---|---|---|---|---|---|---|---:|---:|---|",
)
H1_HEAD = (
    "gpuplan at headroom 1.0 (SLA-limited capacity, no queueing margin):",
    "",
    "| case | gpuplan agg | gpuplan disagg | gpuplan choice | agg ratio gp/aic | disagg ratio gp/aic |",
    "|---|---|---|---|---:|---:|",
)


def report(raws: dict[str, dict[str, Any]]) -> str:
    """The three markdown tables and the agreement count."""
    main, h1 = list(MAIN_HEAD), list(H1_HEAD)
    agreed = 0
    for case in CASES:
        row, row_h1, agree = case_rows(case, raws[case.name], gpuplan_answers(case))
        main.append(row)
        h1.append(row_h1)
        agreed += agree
    errors = [f"- {name}: aiconfigurator {raw['error']}" for name, raw in raws.items() if raw.get("error")]
    at_rate = [at_aic_rate_row(case, raws[case.name]) for case in CASES]
    count = f"Agreement on the agg/disagg choice: {agreed} of {len(CASES)} cases."
    return "\n".join([*main, "", count, "", *errors, "", *h1, "", *AT_AIC_RATE_HEAD, *at_rate])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--peer-venv", type=Path, help="venv with aiconfigurator; rerun it and rewrite the raw file"
    )
    args = parser.parse_args()
    if args.peer_venv is not None:
        raws = {case.name: run_aiconfigurator(args.peer_venv, case) for case in CASES}
        RAW.write_text(json.dumps(raws, indent=1, sort_keys=True) + "\n")
    else:
        raws = json.loads(RAW.read_text())
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    version = next((r["version"] for r in raws.values() if r.get("version")), "?")
    print(
        f"aiconfigurator {version} (raw: {RAW.name}); gpuplan at commit {commit}; {' '.join(sys.argv[1:])}\n"
    )
    print(report(raws))


if __name__ == "__main__":
    main()

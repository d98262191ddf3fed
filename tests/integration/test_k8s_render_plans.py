"""``gpuplan recommend`` plans rendered by ``gpuplan k8s render``: a wide-EP DeepSeek-V3 plan, a
disaggregated plan whose decode worker spans nodes, and a ``--kv-overlap`` plan on vLLM's NixlConnector."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

DEEPSEEK = ["--model", "deepseek-ai/DeepSeek-V3", "--input-tokens", "4000", "--output-tokens", "500"]
SLO = ["--ttft-ms", "3000", "--tpot-ms", "50", "--dtypes", "fp8", "--format", "json"]


def _plan(invoke: Callable[..., Any], tmp_path: Path, *flags: str) -> tuple[Path, dict[str, Any]]:
    rec = invoke("recommend", *flags)
    assert rec.exit_code == 0, rec.stderr
    path = tmp_path / "plan.json"
    path.write_text(rec.stdout, encoding="utf-8")
    best: dict[str, Any] = json.loads(rec.stdout)["plans"][0]
    return path, best


def _commands(stdout: str) -> list[list[str]]:
    deps = [d for d in yaml.safe_load_all(stdout) if d and d["kind"] == "Deployment"]
    return [d["spec"]["template"]["spec"]["containers"][0]["command"] for d in deps]


def test_wide_ep_plan_renders_dp_and_ep_flags(invoke: Callable[..., Any], tmp_path: Path) -> None:
    """The reviewer's example: 5 req/s on H200/B200 in fp8 is one node of 8 attention-DP ranks with
    8-way EP; each pod holds 8 GPUs and the engines are told so (not TP 1 on one GPU)."""
    plan, best = _plan(invoke, tmp_path, *DEEPSEEK, "--rate", "5", "--gpus", "H200-SXM,B200", *SLO)
    dp, ep, tp = best["attention_dp"], best["ep"], best["tp"]
    assert dp > 1 and ep == tp * dp
    for engine in ("vllm", "sglang"):
        run = invoke("k8s", "render", plan, "--engine", engine)
        assert run.exit_code == 0, run.stderr
        (line,) = _commands(run.stdout)
        if engine == "vllm":
            assert line[line.index("--data-parallel-size") + 1] == str(dp)
            assert (
                line[line.index("--tensor-parallel-size") + 1] == str(tp)
                and "--enable-expert-parallel" in line
            )
        else:
            assert line[line.index("--tp-size") + 1] == str(tp * dp) and "--enable-dp-attention" in line
            assert (line[line.index("--dp-size") + 1], line[line.index("--ep-size") + 1]) == (
                str(dp),
                str(ep),
            )


def test_worker_across_nodes_is_refused(
    invoke: Callable[..., Any], user_error: Callable[..., str], tmp_path: Path
) -> None:
    """20 req/s disaggregated on H200: a 16-GPU decode worker (two 8-GPU nodes) is not rendered."""
    flags = ["--rate", "20", "--gpus", "H200-SXM", "--layouts", "disaggregated"]
    plan, best = _plan(invoke, tmp_path, *DEEPSEEK, *flags, *SLO)
    decode = best["decode"]
    gpus = decode["tp"] * decode["pp"] * decode["attention_dp"]
    assert gpus > 8  # the premise: one worker is more than one HGX node
    line = user_error("k8s", "render", plan, "--engine", "sglang")
    nodes = -(-gpus // 8)  # H200-SXM: 8 GPUs per HGX node (the catalog's scale-up domain)
    assert line.startswith("error: decode (") and f"needs {gpus} GPUs per worker across {nodes} nodes" in line
    assert "multi-node workers (LeaderWorkerSet) are not rendered" in line


def test_kv_overlap_on_nixl_warns(invoke: Callable[..., Any], tmp_path: Path) -> None:
    flags = [
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--rate",
        "20",
        "--input-tokens",
        "8000",
        "--output-tokens",
        "500",
    ]
    slo = [
        "--ttft-ms",
        "2000",
        "--tpot-ms",
        "40",
        "--gpus",
        "H200-SXM",
        "--dtypes",
        "fp8",
        "--format",
        "json",
    ]
    plan, best = _plan(invoke, tmp_path, *flags, *slo, "--layouts", "disaggregated", "--kv-overlap")
    assert best["layout_kind"] == "disaggregated"
    vllm = invoke("k8s", "render", plan, "--engine", "vllm")
    assert vllm.exit_code == 0 and len(_commands(vllm.stdout)) == 3  # prefill, decode, router: still valid
    (warning,) = [w for w in vllm.stderr.splitlines() if w]
    assert warning.startswith("warning: ") and "NixlConnector" in warning and "--kv-overlap" in warning
    assert invoke("k8s", "render", plan, "--engine", "sglang").stderr.strip() == ""
    plain, _ = _plan(invoke, tmp_path, *flags, *slo, "--layouts", "disaggregated")
    assert invoke("k8s", "render", plain, "--engine", "vllm").stderr.strip() == ""

"""Manifests: golden files, Kubernetes schemas, Pod Security "restricted", engine args, labels, inventory.

Regenerate the golden files after an intended change with ``GPUPLAN_UPDATE_GOLDEN=1 pytest tests/unit/adapters/k8s``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.catalog.product_names import gpu_from_label, product_label
from gpuplan.adapters.k8s.engine_args import ENGINES, EngineArgs, command
from gpuplan.adapters.k8s.inventory import build_inventory
from gpuplan.adapters.k8s.manifests import render
from gpuplan.adapters.k8s.pools import PoolDeployment
from gpuplan.adapters.k8s.validate import restricted_violations
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import UnknownNameError, UserInputError
from gpuplan.core.perf.layout import Layout
from gpuplan.usecases.deploy import dump

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "k8s"
UPDATE_ENV = "GPUPLAN_UPDATE_GOLDEN"


def _pool(**kw: Any) -> PoolDeployment:
    base: dict[str, Any] = dict(
        name="chat-a10",
        fleet="seed-003",
        model="Qwen/Qwen2.5-7B-Instruct",
        gpu="A10",
        product_label="NVIDIA-A10",
        min_memory_mib=20598,
        mig_profile=None,
        tier="cost",
        layout=Layout(replicas=3, weight_dtype="int4"),
        checkpoint="Qwen/Qwen2.5-7B-Instruct-AWQ",
        max_model_len=768,
        max_num_seqs=44,
        max_unavailable=1,
        rate_rps=11.4,
        input_tokens=512,
        output_tokens=256,
    )
    return PoolDeployment(**{**base, **kw})


REPORTS = _pool(
    name="reports-a100-80gb-sxm",
    model="Qwen/Qwen2.5-14B-Instruct",
    gpu="A100-80GB-SXM",
    product_label="NVIDIA-A100-SXM4-80GB",
    min_memory_mib=68664,
    tier="general",
    layout=Layout(tp=2, weight_dtype="fp8"),
    checkpoint=None,
    max_model_len=5120,
    max_num_seqs=12,
    rate_rps=0.6,
    input_tokens=4096,
    output_tokens=1024,
)
MIG = _pool(
    name="tiny-a100-80gb-sxm-1g-10gb",
    fleet="mig",
    model="Qwen/Qwen2.5-0.5B-Instruct",
    gpu="A100-80GB-SXM",
    product_label="NVIDIA-A100-SXM4-80GB",
    min_memory_mib=68664,
    mig_profile="1g.10gb",
    layout=Layout(replicas=2),
    checkpoint=None,
    max_model_len=384,
    max_num_seqs=16,
    rate_rps=2.0,
    input_tokens=256,
    output_tokens=128,
)
WIDE_EP = _pool(
    name="deepseek-v3",
    fleet="deepseek-v3",
    model="deepseek-ai/DeepSeek-V3",
    gpu="H200-SXM",
    product_label="NVIDIA-H200",
    min_memory_mib=128746,
    tier="hpc",
    layout=Layout(tp=1, attention_dp=8, ep=8, weight_dtype="fp8"),
    checkpoint=None,
    max_model_len=4500,
    max_num_seqs=336,
    rate_rps=5.0,
    input_tokens=4000,
    output_tokens=500,
)
"""A wide-EP replica: 8 attention-DP ranks of one GPU, experts split 8 ways, one 8-GPU node."""
MI300X = WIDE_EP.model_copy(
    update={
        "name": "deepseek-v3-mi300x",
        "gpu": "MI300X",
        "vendor": "AMD",
        "family": "cdna3",
        "product_label": "AMD_Instinct_MI300X",
        "product_labels": ("AMD_Instinct_MI300X", "AMD_Instinct_MI300X_OAM"),
        "tier": "general",
    }
)
CASES = {
    "seed-003-vllm": ([_pool(), REPORTS], "vllm", "ghcr.io/example/gpuplan:0.1.0"),
    "wide-ep-vllm": ([WIDE_EP], "vllm", None),
    "wide-ep-sglang": ([WIDE_EP], "sglang", None),
    "mi300x-sglang": ([MI300X], "sglang", None),
    "mig-sglang": ([MIG], "sglang", None),
    "plan-tgi": ([_pool(name="qwen2-5-7b-instruct", fleet="qwen2-5-7b-instruct", tier="cost")], "tgi", None),
}


def _all(files: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [o for objs in files.values() for o in objs]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    pools, engine, image = CASES[case]
    text = dump(_all(render(pools, engine, ns="gpuplan", bench_image=image)))  # type: ignore[arg-type]
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing {path}; run with {UPDATE_ENV}=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("engine", ENGINES)
def test_every_object_validates_against_kubernetes_schema(engine: str) -> None:
    pytest.importorskip("kubernetes_validate")
    from gpuplan.adapters.k8s.validate import validate_schema

    objs = _all(render([_pool(), MIG], engine, bench_image="img:1"))  # type: ignore[arg-type]
    assert {o["kind"] for o in objs} == {
        "Namespace",
        "PriorityClass",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Job",
    }
    validate_schema(objs)


def test_schema_violation_is_reported() -> None:
    pytest.importorskip("kubernetes_validate")
    from gpuplan.adapters.k8s.validate import validate_schema
    from gpuplan.core.errors import DataError

    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": "80"}}
    with pytest.raises(DataError, match="Service/x fails the Kubernetes"):
        validate_schema([bad])


def test_pods_pass_restricted_profile() -> None:
    for engine in ENGINES:
        for obj in _all(render([_pool(), MIG], engine, bench_image="img:1")):
            assert restricted_violations(obj) == [], obj["metadata"]["name"]
    assert restricted_violations({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})


def test_gpu_and_mig_resources_and_placement() -> None:
    files = render([REPORTS, MIG], "vllm")
    deps = {o["metadata"]["name"]: o for o in _all(files) if o["kind"] == "Deployment"}
    big = deps["reports-a100-80gb-sxm"]["spec"]["template"]["spec"]
    assert big["containers"][0]["resources"]["limits"] == {"cpu": "16", "memory": "32Gi", "nvidia.com/gpu": 2}
    assert big["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert big["priorityClassName"] == "gpuplan-general"
    small = deps["tiny-a100-80gb-sxm-1g-10gb"]["spec"]["template"]["spec"]
    assert small["containers"][0]["resources"]["limits"] == {
        "cpu": "8",
        "memory": "16Gi",
        "nvidia.com/mig-1g.10gb": 1,
    }


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_pods_are_bounded_and_hold_no_api_token(engine: str) -> None:
    """Issue 22: manifests had no CPU/memory limits, an unbounded model-cache emptyDir and an
    automounted service-account token. Now: limits, every emptyDir sized (cache: twice the replica's
    GPU memory, 2 x 2 x 80 GB A100s = 320 GB), no token, a read-only root where the engine allows it."""
    files = render([REPORTS, MIG], engine, bench_image="gpuplan:dev")  # type: ignore[arg-type]
    pods = [o["spec"]["template"]["spec"] for o in _all(files) if o["kind"] in ("Deployment", "Job")]
    for pod in pods:
        assert pod["automountServiceAccountToken"] is False
        assert all("sizeLimit" in v["emptyDir"] for v in pod["volumes"])
        for c in pod["containers"]:
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]) and {"cpu", "memory"} <= set(
                c["resources"]["requests"]
            )
            read_only = c["securityContext"]["readOnlyRootFilesystem"]
            assert read_only is (c["name"] != "tgi")
    reports = next(o for o in _all(files) if o["metadata"]["name"] == "reports-a100-80gb-sxm")
    cache = next(v for v in reports["spec"]["template"]["spec"]["volumes"] if v["name"] == "cache")
    assert cache["emptyDir"]["sizeLimit"] == "299Gi"  # 320 GB = 298.02 GiB, rounded up


def test_engine_args_follow_the_plan() -> None:
    layout = Layout(tp=2, pp=2, weight_dtype="fp8")
    a = EngineArgs(model="m", layout=layout, max_model_len=4096, max_num_seqs=64)
    vllm = command("vllm", a)
    for flag, value in [
        ("--tensor-parallel-size", "2"),
        ("--pipeline-parallel-size", "2"),
        ("--max-model-len", "4096"),
        ("--max-num-seqs", "64"),
        ("--quantization", "fp8"),
        ("--kv-cache-dtype", "fp8"),
        ("--gpu-memory-utilization", "0.9"),
    ]:
        assert vllm[vllm.index(flag) + 1] == value
    sglang = command("sglang", a)
    assert (
        sglang[sglang.index("--tp-size") + 1] == "2"
        and sglang[sglang.index("--context-length") + 1] == "4096"
        and sglang[sglang.index("--mem-fraction-static") + 1] == "0.88"
        and sglang[sglang.index("--kv-cache-dtype") + 1] == "fp8_e5m2"
    )
    share = command("vllm", replace(a, layout=layout.model_copy(update={"gpu_memory_utilization": 0.8})))
    assert share[share.index("--gpu-memory-utilization") + 1] == "0.8"
    with pytest.raises(UserInputError, match="TGI has no pipeline parallelism"):
        command("tgi", a)
    int4 = replace(a, layout=layout.model_copy(update={"pp": 1, "weight_dtype": get_dtype("int4")}))
    tgi = command("tgi", replace(int4, checkpoint="org/m-AWQ"))
    assert tgi[tgi.index("--num-shard") + 1] == "2" and tgi[tgi.index("--model-id") + 1] == "org/m-AWQ"
    assert "--quantize" not in tgi  # the checkpoint's quantization_config decides
    with pytest.raises(UserInputError, match="no flag for nf4"):
        command("vllm", replace(a, layout=layout.model_copy(update={"weight_dtype": get_dtype("nf4")})))


def test_product_labels_round_trip() -> None:
    cat = load_catalog()
    assert product_label(cat.get_gpu("A100-80GB-SXM")) == "NVIDIA-A100-SXM4-80GB"
    assert product_label(cat.get_gpu("T4")) == "Tesla-T4"
    for gid in cat.gpu_ids():
        assert gpu_from_label(cat, product_label(cat.gpus[gid]))[0].id == gid
    assert gpu_from_label(cat, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb") == (
        cat.get_gpu("A100-80GB-SXM"),
        "1g.10gb",
    )
    with pytest.raises(UnknownNameError, match="unknown GPU product label"):
        gpu_from_label(cat, "NVIDIA-Quantum-9000")


def test_inventory_counts_allocatable_and_used() -> None:
    from fake_kube import sample_cluster

    fake = sample_cluster()
    inv = build_inventory(fake.nodes, fake.pods, catalog=load_catalog())
    totals = {(t.product, t.mig_profile): t for t in inv.totals}
    a100 = totals[("NVIDIA-A100-SXM4-80GB", None)]
    assert (a100.gpu, a100.allocatable, a100.used, a100.available) == ("A100-80GB-SXM", 8, 4, 4)
    a10 = totals[("NVIDIA-A10", None)]
    assert (a10.allocatable, a10.used, a10.used_by_gpuplan, a10.available) == (4, 2, 2, 4)
    mig = totals[("NVIDIA-A100-SXM4-80GB", "1g.10gb")]
    assert (mig.allocatable, mig.used, mig.available) == (14, 3, 11)
    assert len(inv.nodes) == 3


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_int4_needs_a_pre_quantised_checkpoint(engine: str) -> None:
    """Issue 18: an int4 pool rendered ``vllm serve <base checkpoint> --quantization awq``, which vLLM
    refuses at start-up. Without a checkpoint the render stops naming ``--checkpoint``; with one the
    engine loads it and (vLLM, SGLang) serves it under the planned model's name."""
    a = EngineArgs(model="org/m", layout=Layout(weight_dtype="int4"), max_model_len=1024, max_num_seqs=8)
    with pytest.raises(UserInputError, match="int4 weights of org/m need a pre-quantised checkpoint") as info:
        command(engine, a)  # type: ignore[arg-type]
    assert "--checkpoint" in str(info.value)
    line = command(engine, replace(a, checkpoint="org/m-AWQ"))  # type: ignore[arg-type]
    assert "org/m-AWQ" in line and "--quantization" not in line and "--quantize" not in line
    if engine != "tgi":
        assert line[line.index("--served-model-name") + 1] == "org/m"


def test_tgi_int8_is_quantised_at_start_up() -> None:
    a = EngineArgs(model="org/m", layout=Layout(weight_dtype="int8"), max_model_len=1024, max_num_seqs=8)
    line = command("tgi", a)
    assert line[line.index("--quantize") + 1] == "eetq" and line[line.index("--model-id") + 1] == "org/m"
    with pytest.raises(UserInputError, match="pre-quantised"):
        command("vllm", a)

"""Disaggregated plans as manifests: prefill and decode Deployments with the engines' disaggregation
flags, headless pool Services, a router in front; TGI refused; aggregated renders untouched.

Regenerate the golden files after an intended change with ``GPUPLAN_UPDATE_GOLDEN=1 pytest tests/unit/adapters/k8s``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.k8s.disaggregated import is_disaggregated, render_disaggregated
from gpuplan.adapters.k8s.engine_args import disaggregation_flags
from gpuplan.adapters.k8s.pools import PoolDeployment, from_disaggregated_plan
from gpuplan.adapters.k8s.validate import restricted_violations
from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.request import Plan
from gpuplan.usecases.deploy import dump, render_files

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "k8s"
UPDATE_ENV = "GPUPLAN_UPDATE_GOLDEN"
Obj = dict[str, Any]


def _pool(**kw: Any) -> PoolDeployment:
    base: dict[str, Any] = dict(
        name="llama-decode",
        fleet="llama",
        model="meta-llama/Llama-3.1-70B",
        gpu="H200-SXM",
        product_label="NVIDIA-H200",
        min_memory_mib=121021,
        mig_profile=None,
        tier="hpc",
        layout=Layout(tp=4, replicas=2, weight_dtype="fp8"),
        max_model_len=8500,
        max_num_seqs=40,
        max_unavailable=1,
        rate_rps=20.0,
        role="decode",
    )
    return PoolDeployment(**{**base, **kw})


DECODE = _pool()
PREFILL = _pool(
    name="llama-prefill",
    gpu="H100-SXM",
    product_label="NVIDIA-H100-80GB-HBM3",
    min_memory_mib=73728,
    layout=Layout(tp=2, replicas=3, weight_dtype="fp8"),
    max_num_seqs=256,
    role="prefill",
)


def _objs(engine: str, **kw: Any) -> list[Obj]:
    files = render_disaggregated([PREFILL, DECODE], engine, ns="gpuplan", **kw)  # type: ignore[arg-type]
    return [o for objs in files.values() for o in objs]


def _by(objs: list[Obj], kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _command(dep: Obj) -> list[str]:
    line: list[str] = dep["spec"]["template"]["spec"]["containers"][0]["command"]
    return line


def _after(line: list[str], flag: str) -> str:
    return line[line.index(flag) + 1]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_pools_keep_their_workers_gpus_and_products(engine: str) -> None:
    deps = _by(_objs(engine), "Deployment")
    assert set(deps) == {"llama-prefill", "llama-decode", "llama-router"}
    for pool in (PREFILL, DECODE):
        dep = deps[pool.name]
        pod = dep["spec"]["template"]["spec"]
        assert dep["spec"]["replicas"] == pool.layout.replicas
        assert (
            pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == pool.layout.tp * pool.layout.pp
        )
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": pool.product_label}
        assert dep["spec"]["template"]["metadata"]["labels"]["gpuplan.dev/role"] == pool.role
        tp_flag = "--tensor-parallel-size" if engine == "vllm" else "--tp-size"
        assert _after(_command(dep), tp_flag) == str(pool.layout.tp)
    router = deps["llama-router"]["spec"]["template"]["spec"]
    assert (
        "nodeSelector" not in router
        and "nvidia.com/gpu" not in router["containers"][0]["resources"]["limits"]
    )


def test_vllm_workers_use_the_nixl_connector_and_the_toy_proxy() -> None:
    objs = _objs("vllm")
    deps = _by(objs, "Deployment")
    for name in ("llama-prefill", "llama-decode"):
        line = _command(deps[name])
        config = json.loads(_after(line, "--kv-transfer-config"))
        assert config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        env = {e["name"]: e for e in deps[name]["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    proxy = _command(deps["llama-router"])
    assert proxy[1] == "/proxy/toy_proxy_server.py"
    assert _after(proxy, "--prefiller-hosts") == "llama-prefill.gpuplan.svc"
    assert _after(proxy, "--decoder-hosts") == "llama-decode.gpuplan.svc"
    assert _after(proxy, "--decoder-ports") == "8000"  # headless: the engine's own port, no kube-proxy
    volumes = deps["llama-router"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "proxy", "configMap": {"name": "vllm-pd-proxy", "optional": False}} in volumes
    assert not _by(objs, "Role")  # the proxy is given hosts; it reads nothing from the API


def test_sglang_workers_have_modes_and_the_router_discovers_them() -> None:
    objs = _objs("sglang")
    deps = _by(objs, "Deployment")
    prefill, decode = _command(deps["llama-prefill"]), _command(deps["llama-decode"])
    assert (
        _after(prefill, "--disaggregation-mode") == "prefill"
        and _after(decode, "--disaggregation-mode") == "decode"
    )
    assert _after(prefill, "--disaggregation-transfer-backend") == "mooncake"
    assert _after(prefill, "--disaggregation-bootstrap-port") == "8998"
    assert "--disaggregation-bootstrap-port" not in decode
    assert "--disaggregation-ib-device" not in prefill  # the user's NIC: named in an annotation
    meta = deps["llama-prefill"]["spec"]["template"]["metadata"]["annotations"]
    assert (
        meta["sglang.ai/bootstrap-port"] == "8998"
        and "--disaggregation-ib-device" in meta["gpuplan.dev/rdma"]
    )
    router = _command(deps["llama-router"])
    assert router[:5] == [
        "python3",
        "-m",
        "sglang_router.launch_router",
        "--pd-disaggregation",
        "--service-discovery",
    ]
    assert _after(router, "--prefill-selector") == "app.kubernetes.io/name=llama-prefill"
    assert _after(router, "--decode-selector") == "app.kubernetes.io/name=llama-decode"
    pod = deps["llama-router"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "llama-router" and pod["automountServiceAccountToken"] is True
    rules = _by(objs, "Role")["llama-router"]["rules"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]} in rules
    binding = _by(objs, "RoleBinding")["llama-router"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "llama-router", "namespace": "gpuplan"}]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_services_headless_pools_and_router_front(engine: str) -> None:
    svcs = _by(_objs(engine), "Service")
    assert set(svcs) == {"llama-prefill", "llama-decode", "llama"}
    for name in ("llama-prefill", "llama-decode"):
        assert svcs[name]["spec"]["clusterIP"] == "None"
        assert svcs[name]["spec"]["selector"] == {
            "app.kubernetes.io/name": name,
            "app.kubernetes.io/part-of": "llama",
        }
    front = svcs["llama"]["spec"]
    assert front["type"] == "ClusterIP" and front["selector"]["app.kubernetes.io/name"] == "llama-router"
    assert front["ports"][0]["port"] == 80


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_objects_validate_and_pass_restricted(engine: str) -> None:
    objs = _objs(engine, bench_image="img:1")
    assert all(restricted_violations(o) == [] for o in objs)
    pytest.importorskip("kubernetes_validate")
    from gpuplan.adapters.k8s.validate import validate_schema

    validate_schema(objs)
    job = _by(objs, "Job")["llama-bench"]
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "--url http://llama.gpuplan.svc:80" in script and "1)" not in script  # one case: the router


def test_tgi_is_refused_in_one_line() -> None:
    with pytest.raises(UserInputError, match="--engine tgi has no prefill/decode disaggregated mode") as info:
        render_files([PREFILL, DECODE], "tgi", namespace="gpuplan", bench_image=None)
    assert "\n" not in str(info.value) and "--engine vllm or sglang" in str(info.value)
    with pytest.raises(UserInputError):
        disaggregation_flags("tgi", "decode")


PLAN: Obj = {
    "gpu": "H200-SXM",
    "count": 66,
    "tp": 4,
    "pp": 1,
    "replicas": 5,
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
    "concurrency_per_replica": 34.0,
    "ttft_ms": 1918.0,
    "tpot_ms": 16.6,
    "output_tokens_per_s": 10000.0,
    "requests_per_s": 20.0,
    "usd_per_hour": 299.64,
    "usd_per_month": 218737.2,
    "usd_per_million_output_tokens": 8.32,
    "memory_per_gpu_gib": 28.9,
    "memory_breakdown_gib": {
        "weights": 16.9,
        "kv_cache": 108.4,
        "activation": 0.74,
        "overhead": 0.45,
        "total": 126.5,
        "capacity": 140.55,
    },
    "bound": "memory",
    "price_source": "test",
    "calibrated": True,
    "layout_kind": "disaggregated",
    "prefill": {
        "gpu": "H100-SXM",
        "count": 46,
        "tp": 2,
        "pp": 1,
        "ep": 1,
        "workers": 23,
        "weight_dtype": "fp8",
        "usd_per_hour": 208.84,
        "busy_share": 0.72,
    },
    "decode": {
        "gpu": "H200-SXM",
        "count": 20,
        "tp": 4,
        "pp": 1,
        "ep": 1,
        "workers": 5,
        "weight_dtype": "fp8",
        "usd_per_hour": 90.8,
        "busy_share": 0.1,
    },
    "kv_transfer_ms": 13.6,
}


def test_a_disaggregated_plan_becomes_a_prefill_and_a_decode_pool() -> None:
    plan = Plan.model_validate(PLAN)
    prefill, decode = from_disaggregated_plan(plan, "m/x", load_catalog(), max_model_len=8500, name="x")
    assert (prefill.name, prefill.role, prefill.fleet) == ("x-prefill", "prefill", "x")
    assert (decode.name, decode.role, decode.fleet) == ("x-decode", "decode", "x")
    assert (prefill.gpu, prefill.layout.tp, prefill.layout.replicas) == ("H100-SXM", 2, 23)
    assert (decode.gpu, decode.layout.tp, decode.layout.replicas) == ("H200-SXM", 4, 5)
    assert prefill.product_label == "NVIDIA-H100-80GB-HBM3" and decode.product_label == "NVIDIA-H200"
    assert decode.max_num_seqs == 40  # ceil(34 running / 0.85 headroom)
    assert prefill.max_num_seqs == 256  # the engine default: prompt steps are bounded by tokens
    assert prefill.max_unavailable == 6  # floor(23 x (1 - 0.72)): what the others' idle share covers
    assert is_disaggregated([prefill, decode]) and not is_disaggregated(
        [decode.model_copy(update={"role": None})]
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_golden(engine: str) -> None:
    text = dump(_objs(engine, bench_image="ghcr.io/example/gpuplan:0.1.0"))
    path = GOLDEN / f"disagg-{engine}.yaml"
    if os.environ.get(UPDATE_ENV) == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing {path}; run with {UPDATE_ENV}=1"
    assert text == path.read_text(encoding="utf-8")

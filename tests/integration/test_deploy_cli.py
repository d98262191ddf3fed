"""``gpuplan fleet`` and ``gpuplan k8s render | inventory | apply`` end to end, against a local fake
Kubernetes API on 127.0.0.1 (no cluster is available here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

FAKE = Path(__file__).resolve().parents[1] / "unit" / "adapters" / "k8s" / "fake_kube.py"
_spec = importlib.util.spec_from_file_location("fake_kube", FAKE)
assert _spec is not None and _spec.loader is not None
fake_kube = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fake_kube", fake_kube)
_spec.loader.exec_module(fake_kube)

SEED = """
name: seed-003
total_rate_rps: 12
gpus: [A10, A100-80GB-SXM]
classes:
  - {name: chat, model: Qwen/Qwen2.5-7B-Instruct, share: 0.95, input_tokens: 512, output_tokens: 256,
     sla: {ttft_ms: 1000, tpot_ms: 50}, checkpoints: {int4: Qwen/Qwen2.5-7B-Instruct-AWQ}}
  - {name: reports, model: Qwen/Qwen2.5-14B-Instruct, share: 0.05, input_tokens: 4096, output_tokens: 1024,
     sla: {ttft_ms: 3000, tpot_ms: 50}, checkpoints: {int4: Qwen/Qwen2.5-14B-Instruct-AWQ}}
"""


@pytest.fixture()
def seed(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(SEED, encoding="utf-8")
    return path


@pytest.fixture()
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    fake = fake_kube.sample_cluster().start()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    try:
        yield fake
    finally:
        fake.stop()


def test_fleet_table_and_json(invoke: Callable[..., Any], seed: Path) -> None:
    run = invoke("fleet", seed)
    assert run.exit_code == 0, run.stderr
    assert "chat-a10" in run.stdout and "saving $" in run.stdout
    run = invoke("fleet", seed, "--format", "json")
    doc = json.loads(run.stdout)
    assert doc["saving_usd_per_month"] > 0 and doc["best_single_type"]["unit"] == "A100-80GB-SXM"
    assert {p["gpu"] for p in doc["pools"]} == {"A10", "A100-80GB-SXM"}


def test_fleet_bad_inputs_are_one_line(user_error: Callable[..., str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED.replace("0.95", "0.85"), encoding="utf-8")
    assert "shares sum to 0.9, not 1" in user_error("fleet", bad)
    bad.write_text(SEED.replace("[A10, A100-80GB-SXM]", "[NVIDIA-Quantum-9000]"), encoding="utf-8")
    assert "unknown GPU product label 'NVIDIA-Quantum-9000'" in user_error("fleet", bad)
    bad.write_text(SEED + "mig_profiles: [A10/1g.10gb]\n", encoding="utf-8")
    assert "'1g.10gb' is not offered by A10" in user_error("fleet", bad)
    bad.write_text(SEED.replace("tpot_ms: 50}", "tpot_ms: 1}", 1), encoding="utf-8")
    line = user_error("fleet", bad, code=2)
    assert "class 'chat'" in line and "TPOT" in line


def test_render_fleet_json_to_dir(invoke: Callable[..., Any], seed: Path, tmp_path: Path) -> None:
    plan = tmp_path / "fleet.json"
    plan.write_text(invoke("fleet", seed, "-f", "json").stdout, encoding="utf-8")
    out = tmp_path / "out"
    run = invoke("k8s", "render", plan, "--engine", "vllm", "-o", out, "--bench-image", "img:1")
    assert run.exit_code == 0, run.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "00-namespace.yaml",
        "01-priorityclasses.yaml",
        "10-chat-a10.yaml",
        "10-reports-a100-80gb-sxm.yaml",
        "90-bench-job.yaml",
    ]
    dep = next(yaml.safe_load_all((out / "10-chat-a10.yaml").read_text()))
    assert (
        dep["kind"] == "Deployment"
        and "--max-model-len" in dep["spec"]["template"]["spec"]["containers"][0]["command"]
    )


def test_render_recommend_plan(
    invoke: Callable[..., Any], user_error: Callable[..., str], tmp_path: Path
) -> None:
    rec = invoke(
        "recommend",
        "--model",
        "Qwen/Qwen2.5-7B-Instruct",
        "--input-tokens",
        "512",
        "--output-tokens",
        "256",
        "--rate",
        "5",
        "--gpus",
        "A10",
        "--format",
        "json",
    )
    plan = tmp_path / "plan.json"
    plan.write_text(rec.stdout, encoding="utf-8")
    assert json.loads(rec.stdout)["plans"][0]["weight_dtype"] == "int4"  # A10 at 5 req/s: the int4 plan
    assert "--checkpoint REPO" in user_error("k8s", "render", plan, "--engine", "tgi")
    run = invoke("k8s", "render", plan, "--engine", "tgi", "--checkpoint", "Qwen/Qwen2.5-7B-Instruct-AWQ")
    assert run.exit_code == 0, run.stderr
    docs = list(yaml.safe_load_all(run.stdout))
    assert [d["kind"] for d in docs].count("Deployment") == 1 and "PodDisruptionBudget" in [
        d["kind"] for d in docs
    ]
    line = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert line[line.index("--max-total-tokens") + 1] == "768"  # the plan's 512 + 256 tokens, recorded
    assert line[line.index("--model-id") + 1] == "Qwen/Qwen2.5-7B-Instruct-AWQ"
    assert "--engine 'ollama' is not one of" in user_error("k8s", "render", plan, "--engine", "ollama")
    old = json.loads(rec.stdout)
    del old["workload"]  # a plan written before plans recorded their request
    plan.write_text(json.dumps(old), encoding="utf-8")
    assert "--max-model-len" in user_error(
        "k8s", "render", plan, "--checkpoint", "Qwen/Qwen2.5-7B-Instruct-AWQ"
    )


def test_inventory_against_fake_api(
    invoke: Callable[..., Any], cluster: Any, tmp_path: Path, seed: Path
) -> None:
    cfg = cluster.kubeconfig(tmp_path)
    run = invoke("k8s", "inventory", "--kubeconfig", cfg, "--format", "json")
    assert run.exit_code == 0, run.stderr
    inv = json.loads(run.stdout)
    totals = {(t["product"], t["mig_profile"]): t["available"] for t in inv["totals"]}
    assert totals[("NVIDIA-A100-SXM4-80GB", None)] == 4 and totals[("NVIDIA-A10", None)] == 4
    inv_path = tmp_path / "inv.json"
    inv_path.write_text(run.stdout, encoding="utf-8")
    owned = json.loads(invoke("fleet", seed, "--inventory", inv_path, "-f", "json").stdout)
    assert sum(p["owned_units"] for p in owned["pools"]) > 0
    assert invoke("k8s", "inventory", "--kubeconfig", cfg).exit_code == 0


def test_apply_dry_runs_then_applies(
    invoke: Callable[..., Any], cluster: Any, tmp_path: Path, seed: Path
) -> None:
    out = tmp_path / "out"
    assert invoke("k8s", "render", seed, "-o", out).exit_code == 0
    run = invoke("k8s", "apply", out, "--kubeconfig", cluster.kubeconfig(tmp_path))
    assert run.exit_code == 0, run.stderr
    patches = [(path, q) for method, path, q in cluster.requests if method == "PATCH"]
    n = len(cluster.applied)
    assert n == 9 and len(patches) == 2 * n
    assert all(q.get("dryRun") == ["All"] for _, q in patches[:n])
    assert all("dryRun" not in q and q["fieldManager"] == ["gpuplan"] for _, q in patches[n:])
    assert "/apis/apps/v1/namespaces/gpuplan/deployments/chat-a10" in cluster.applied


def test_apply_rejected_dry_run_applies_nothing(
    user_error: Callable[..., str], invoke: Callable[..., Any], cluster: Any, tmp_path: Path, seed: Path
) -> None:
    out = tmp_path / "out"
    assert invoke("k8s", "render", seed, "-o", out).exit_code == 0
    cluster.reject.add("reports-a100-80gb-sxm")
    line = user_error("k8s", "apply", out, "--kubeconfig", cluster.kubeconfig(tmp_path))
    assert "dry-run rejected 3 of 9 objects, nothing applied" in line and "admission webhook denied" in line
    assert cluster.applied == {}


def test_kubeconfig_missing_is_one_line(
    user_error: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert f"kubeconfig {tmp_path / 'nope'} not found" in user_error(
        "k8s", "inventory", "--kubeconfig", tmp_path / "nope"
    )
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    assert "from $KUBECONFIG) not found" in user_error("k8s", "inventory")


def test_unreachable_api_server(user_error: Callable[..., str], tmp_path: Path) -> None:
    fake = fake_kube.FakeKube().start()
    cfg = fake.kubeconfig(tmp_path)
    fake.stop()
    assert "cannot reach the API server http://127.0.0.1:" in user_error(
        "k8s", "inventory", "--kubeconfig", cfg
    )


def test_apply_bad_directory(user_error: Callable[..., str], tmp_path: Path) -> None:
    assert "is not a directory" in user_error("k8s", "apply", tmp_path / "missing")
    (tmp_path / "x.yaml").write_text("kind: Foo\napiVersion: x/v1\nmetadata: {name: a}\n", encoding="utf-8")
    line = user_error("k8s", "apply", tmp_path)
    assert "Foo" in line


def test_checkpoint_is_refused_for_weights_made_at_start_up(
    invoke: Callable[..., Any], user_error: Callable[..., str], tmp_path: Path
) -> None:
    """Review M1: ``--checkpoint`` on an fp8 plan rendered an AWQ repo with ``--quantization fp8``."""
    flags = ["--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "512", "--output-tokens", "128"]
    rec = invoke(
        "recommend", *flags, "--rate", "2", "--gpus", "H100-SXM", "--dtypes", "fp8", "--format", "json"
    )
    plan = tmp_path / "fp8.json"
    plan.write_text(rec.stdout, encoding="utf-8")
    line = user_error("k8s", "render", plan, "--checkpoint", "org/m-AWQ")
    assert "--checkpoint is for pre-quantised weights" in line and "the plan uses fp8" in line


def test_render_and_apply_a_disaggregated_plan(
    invoke: Callable[..., Any], user_error: Callable[..., str], cluster: Any, tmp_path: Path
) -> None:
    """Issue 20 item 4: a disaggregated recommend plan renders its two pools and a router, and the
    router's RBAC objects apply like the rest."""
    flags = [
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--gpus",
        "H200-SXM",
        "--rate",
        "20",
        "--input-tokens",
        "8000",
    ]
    slo = ["--output-tokens", "500", "--tpot-ms", "20", "--ttft-ms", "2000", "--max-gpus", "512"]
    rec = invoke("recommend", *flags, *slo, "--layouts", "disaggregated", "--format", "json")
    assert rec.exit_code == 0, rec.stderr
    best = json.loads(rec.stdout)["plans"][0]
    assert best["layout_kind"] == "disaggregated"
    plan = tmp_path / "plan.json"
    plan.write_text(rec.stdout, encoding="utf-8")
    out = tmp_path / "out"
    run = invoke("k8s", "render", plan, "--engine", "sglang", "-o", out)
    assert run.exit_code == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "00-namespace.yaml",
        "01-priorityclasses.yaml",
        "10-meta-llama-llama-3-1-70b-decode.yaml",
        "10-meta-llama-llama-3-1-70b-prefill.yaml",
        "20-meta-llama-llama-3-1-70b-router.yaml",
    ]
    prefill = next(yaml.safe_load_all((out / "10-meta-llama-llama-3-1-70b-prefill.yaml").read_text()))
    pool = best["prefill"]
    assert prefill["spec"]["replicas"] == pool["workers"]
    limits = prefill["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == pool["tp"] * pool["pp"]
    run = invoke("k8s", "apply", out, "--kubeconfig", cluster.kubeconfig(tmp_path))
    assert run.exit_code == 0, run.stderr
    assert (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/gpuplan/roles/meta-llama-llama-3-1-70b-router"
        in cluster.applied
    )
    line = user_error("k8s", "render", plan, "--engine", "tgi")
    assert (
        "--engine tgi has no prefill/decode disaggregated mode" in line and "--engine vllm or sglang" in line
    )

"""Kubernetes objects of a fleet, as plain dicts (serialised with ``yaml.safe_dump`` at the edge).

Per pool: a Deployment (engine container, GPU or MIG resources, GFD nodeSelector and memory
affinity, GPU-taint toleration, tier PriorityClass, probes on the engine's health endpoint, a
security context that passes Pod Security "restricted"), a ClusterIP Service and a
PodDisruptionBudget. Per fleet: the Namespace (enforcing "restricted"), one PriorityClass per tier
used, and an Indexed Job that benchmarks every pool in-cluster with ``gpuplan bench serve`` and
writes to the results store whose URL is in a Secret.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any

from gpuplan.adapters.k8s.engine_args import CONTAINER_PORT, HEALTH_PATH, Engine, EngineArgs, command, image
from gpuplan.adapters.k8s.labels import (
    AMD_GPU_RESOURCE,
    AMD_PRODUCT_LABEL,
    GPU_RESOURCE,
    MEMORY_LABEL,
    PRODUCT_LABEL,
    mig_resource,
)
from gpuplan.adapters.k8s.pools import MEMORY_LABEL_FLOOR, PoolDeployment

Obj = dict[str, Any]
MANAGED_BY = "gpuplan"
TIER_LABEL = "gpuplan.dev/tier"
PRIORITY: dict[str, int] = {"hpc": 100_000, "general": 50_000, "cost": 10_000}
"""PriorityClass values per tier (user classes must be ≤ 1e9; system classes sit above 2e9)."""
NON_ROOT_UID = 1000
"""Any non-zero UID; the cache and /dev/shm are emptyDirs, so the engines need no root-owned path."""
CPU_PER_GPU, MEMORY_GIB_PER_GPU = 4, 16
"""Host requests per GPU: tokenisation / scheduler threads and room to stage weights on load."""
CPU_LIMIT_FACTOR = 2
"""CPU limit over the request: room for weight loading and tokenisation bursts without the CFS
throttling a limit equal to the request brings to the scheduler thread. Memory's limit is its request
(a pod over it is OOM-killed alone instead of squeezing its node's other pods)."""
CACHE_BYTES_PER_GPU_BYTE = 2.0
"""Model-cache emptyDir ``sizeLimit`` per byte of the replica's GPU memory: the weights fit in GPU
memory, and a checkpoint quantised at start-up (fp8 from bf16) is at most twice their size."""
READ_ONLY_ROOT_ENGINES = frozenset({"vllm", "sglang"})
"""Engines given a read-only root filesystem: they write only under $HOME (=/cache: HF, Triton and
torch.compile caches), /tmp and /dev/shm, all emptyDirs here. TGI keeps a writable root (its image
writes under /data and /usr/src by default)."""
SHM_GIB = 8
"""/dev/shm for NCCL and the engines' IPC (Docker's 64 MiB default breaks TP > 1)."""
TMP_GIB = 4
"""/tmp emptyDir (the root filesystem is read-only): compiler and IPC scratch files."""
STARTUP_PROBE_PERIOD_S, STARTUP_PROBE_FAILURES = 10, 180
"""Up to 30 min to download and load weights before liveness applies."""
BENCH_DURATION_S = 120
BENCH_STORE_SECRET, BENCH_STORE_KEY = "gpuplan-results", "url"
HF_TOKEN_SECRET = "hf-token"


def _selector(pool: PoolDeployment) -> dict[str, str]:
    """The labels that pick a pool's pods (Deployment, Service and PodDisruptionBudget selectors)."""
    return {"app.kubernetes.io/name": pool.name, "app.kubernetes.io/part-of": pool.fleet}


def _labels(pool: PoolDeployment) -> dict[str, str]:
    return {
        **_selector(pool),
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        TIER_LABEL: pool.tier,
    }


def _meta(name: str, namespace: str | None, labels: dict[str, str]) -> Obj:
    meta: Obj = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def pod_security_context() -> Obj:
    return {
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_UID,
        "runAsGroup": NON_ROOT_UID,
        "fsGroup": NON_ROOT_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(*, read_only_root: bool) -> Obj:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": read_only_root,
    }


def namespace(name: str) -> Obj:
    labels = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def priority_class(tier: str) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"gpuplan-{tier}", "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "value": PRIORITY[tier],
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": f"gpuplan {tier} tier serving pools",
    }


def _resources(pool: PoolDeployment) -> Obj:
    gpus = pool.layout.gpus_per_replica
    whole = {(AMD_GPU_RESOURCE if pool.vendor == "AMD" else GPU_RESOURCE): gpus}
    accelerators = {mig_resource(pool.mig_profile): 1} if pool.mig_profile else whole
    host = 1 if pool.mig_profile else gpus
    memory = f"{MEMORY_GIB_PER_GPU * host}Gi"
    return {
        "requests": {"cpu": str(CPU_PER_GPU * host), "memory": memory},
        "limits": {"cpu": str(CPU_LIMIT_FACTOR * CPU_PER_GPU * host), "memory": memory, **accelerators},
    }


def cache_size_limit(pool: PoolDeployment) -> str:
    """The model cache's ``sizeLimit``: ``CACHE_BYTES_PER_GPU_BYTE`` × the replica's nominal GPU memory."""
    nominal_gib = pool.min_memory_mib / MEMORY_LABEL_FLOOR / 1024
    return f"{math.ceil(CACHE_BYTES_PER_GPU_BYTE * nominal_gib * pool.layout.gpus_per_replica)}Gi"


def _probes(path: str) -> Obj:
    def http(period: int, failures: int) -> Obj:
        return {
            "httpGet": {"path": path, "port": "http"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 5,
        }

    return {
        "startupProbe": http(STARTUP_PROBE_PERIOD_S, STARTUP_PROBE_FAILURES),
        "readinessProbe": http(5, 3),
        "livenessProbe": http(15, 4),
    }


def _engine_container(pool: PoolDeployment, engine: Engine) -> Obj:
    args = EngineArgs(
        model=pool.model,
        layout=pool.layout,
        max_model_len=pool.max_model_len,
        max_num_seqs=pool.max_num_seqs,
        checkpoint=pool.checkpoint,
    )
    probes = _probes(HEALTH_PATH[engine])
    return {
        "name": engine,
        "image": image(engine, pool.vendor, pool.family),
        "command": command(engine, args),
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": [
            {"name": "HOME", "value": "/cache"},
            {"name": "HF_HOME", "value": "/cache/huggingface"},
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "token", "optional": True}},
            },
        ],
        "resources": _resources(pool),
        "volumeMounts": [
            {"name": "cache", "mountPath": "/cache"},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": container_security_context(read_only_root=engine in READ_ONLY_ROOT_ENGINES),
        **probes,
    }


def _node_placement(pool: PoolDeployment) -> Obj:
    """NVIDIA: GFD's product label and at least the GPU's memory; AMD: any of the labeller's product
    names of the GPU (:mod:`labels`). Either way the device plugin's GPU taint is tolerated."""
    if pool.vendor == "AMD":
        expression = {"key": AMD_PRODUCT_LABEL, "operator": "In", "values": list(pool.product_labels)}
        selector: Obj = {}
        taint = AMD_GPU_RESOURCE
    else:
        expression = {"key": MEMORY_LABEL, "operator": "Gt", "values": [str(pool.min_memory_mib - 1)]}
        selector = {"nodeSelector": {PRODUCT_LABEL: pool.product_label}}
        taint = GPU_RESOURCE
    return {
        **selector,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        },
        "tolerations": [{"key": taint, "operator": "Exists", "effect": "NoSchedule"}],
    }


def deployment(pool: PoolDeployment, engine: Engine, ns: str | None) -> Obj:
    labels = _labels(pool)
    pod_spec: Obj = {
        "priorityClassName": f"gpuplan-{pool.tier}",
        **_node_placement(pool),
        "securityContext": pod_security_context(),
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 60,
        "containers": [_engine_container(pool, engine)],
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": cache_size_limit(pool)}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(pool.name, ns, labels),
        "spec": {
            "replicas": pool.layout.replicas,
            "selector": {"matchLabels": _selector(pool)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": pool.max_unavailable},
            },
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def service(pool: PoolDeployment, ns: str | None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(pool.name, ns, _labels(pool)),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(pool),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def disruption_budget(pool: PoolDeployment, ns: str | None) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(pool.name, ns, _labels(pool)),
        "spec": {
            "maxUnavailable": pool.max_unavailable,
            "selector": {"matchLabels": _selector(pool)},
        },
    }


def _bench_script(pools: Sequence[PoolDeployment], ns: str | None) -> str:
    cases = []
    for i, pool in enumerate(pools):
        host = f"{pool.name}.{ns}.svc" if ns else pool.name
        cmd = [
            "gpuplan",
            "bench",
            "serve",
            "--url",
            f"http://{host}:80",
            "--model",
            pool.model,
            "--duration",
            str(BENCH_DURATION_S),
        ]
        if pool.rate_rps:
            cmd += ["--rate", f"{pool.rate_rps:g}"]
        if pool.input_tokens and pool.output_tokens:
            cmd += ["--input-tokens", str(pool.input_tokens), "--output-tokens", str(pool.output_tokens)]
        cases.append(f"  {i}) exec {shlex.join(cmd)} ;;")
    return "\n".join(['case "$JOB_COMPLETION_INDEX" in', *cases, "  *) exit 2 ;;", "esac"])


def bench_job(pools: Sequence[PoolDeployment], fleet: str, ns: str | None, image: str) -> Obj:
    """One Indexed Job: index i benchmarks pool i through its Service; results go to the store."""
    labels = {
        "app.kubernetes.io/part-of": fleet,
        "app.kubernetes.io/component": "benchmark",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    store = {"secretKeyRef": {"name": BENCH_STORE_SECRET, "key": BENCH_STORE_KEY}}
    container = {
        "name": "bench",
        "image": image,
        "command": ["sh", "-c", _bench_script(pools, ns)],
        "env": [{"name": "GPUPLAN_STORE", "valueFrom": store}, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": container_security_context(read_only_root=True),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(f"{fleet}-bench"[:63].rstrip("-"), ns, labels),
        "spec": {
            "completionMode": "Indexed",
            "completions": len(pools),
            "parallelism": 1,
            "backoffLimit": 2 * len(pools),
            "ttlSecondsAfterFinished": 86_400,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security_context(),
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}}],
                },
            },
        },
    }


def render(
    pools: Sequence[PoolDeployment], engine: Engine, *, ns: str = "gpuplan", bench_image: str | None = None
) -> dict[str, list[Obj]]:
    """File name -> objects, in apply order (namespace and priority classes first)."""
    files: dict[str, list[Obj]] = {
        "00-namespace.yaml": [namespace(ns)],
        "01-priorityclasses.yaml": [priority_class(t) for t in PRIORITY if any(p.tier == t for p in pools)],
    }
    for pool in pools:
        files[f"10-{pool.name}.yaml"] = [
            deployment(pool, engine, ns),
            service(pool, ns),
            disruption_budget(pool, ns),
        ]
    if bench_image and pools:
        files["90-bench-job.yaml"] = [bench_job(pools, pools[0].fleet, ns, bench_image)]
    return files

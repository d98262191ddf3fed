"""Kubernetes objects of a disaggregated plan: a prefill pool, a decode pool and a router in front.

Per pool (``PoolDeployment.role`` set): the Deployment of :func:`manifests.deployment` (replicas =
the pool's workers, ``nvidia.com/gpu`` = its tp x pp, nodeSelector on its GPU product) with the
engine's disaggregation flags (:func:`engine_args.disaggregation_flags`), a headless Service (the
router reaches the workers by pod IP) and a PodDisruptionBudget. In front: one router Deployment and
a ClusterIP Service named after the plan (clients use ``http://<name>`` as for an aggregated plan).

Routers (what is assumed, as the ``gpuplan.dev/router`` annotation says on the pod):
- SGLang: ``python3 -m sglang_router.launch_router --pd-disaggregation`` with Kubernetes service
  discovery (``--service-discovery --prefill-selector --decode-selector``), which finds every ready
  worker pod and reads a prefill pod's bootstrap port from its ``sglang.ai/bootstrap-port``
  annotation (https://docs.sglang.ai/advanced_features/router.html); it needs to list and watch
  pods, so it gets a ServiceAccount, a Role and a RoleBinding, and is the one pod with an API token.
  The router is assumed to ship in the SGLang image (``sglang-router``).
- vLLM: no router ships in the image. The NixlConnector guide routes with vLLM's
  ``toy_proxy_server.py`` (https://docs.vllm.ai/en/v0.11.0/features/nixl_connector_usage.html), a
  test proxy: the router pod runs it from the ConfigMap ``vllm-pd-proxy`` that the user creates from
  that file (the pod waits until it exists). It is given one host per pool, the headless Service,
  so pods are picked by DNS per connection, not balanced per request; llm-d or Dynamo are the
  production routers and out of scope here.

RDMA: the KV cache goes over whatever the pod can reach. Clusters name their RDMA NIC resource
differently (it depends on the device plugin), so none is requested: the ``gpuplan.dev/rdma``
annotation says what to add. RDMA also usually needs the ``IPC_LOCK`` capability, which the
"restricted" Pod Security profile of the namespace forbids.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.adapters.k8s.engine_args import (
    CONTAINER_PORT,
    IMAGES,
    SGLANG_BOOTSTRAP_PORT,
    Engine,
    disaggregation_flags,
    require_disaggregation,
)
from gpuplan.adapters.k8s.manifests import (
    MANAGED_BY,
    PRIORITY,
    TMP_GIB,
    Obj,
    bench_job,
    container_security_context,
    deployment,
    disruption_budget,
    namespace,
    pod_security_context,
    priority_class,
    service,
)
from gpuplan.adapters.k8s.pools import PoolDeployment

ROLE_LABEL = "gpuplan.dev/role"
ROUTER_ANNOTATION = "gpuplan.dev/router"
RDMA_ANNOTATION = "gpuplan.dev/rdma"
KV_TRANSPORT_ANNOTATION = "gpuplan.dev/kv-transport"
SGLANG_BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"
"""Where SGLang's router reads a discovered prefill pod's bootstrap port (its default annotation,
``bootstrap_port_annotation`` in sgl-project/sglang sgl-router; https://docs.sglang.ai/advanced_features/router.html)."""
NIXL_SIDE_CHANNEL_PORT = 5600
"""vLLM's default ``VLLM_NIXL_SIDE_CHANNEL_PORT``, the NIXL handshake port
(https://docs.vllm.ai/en/v0.11.0/features/nixl_connector_usage.html)."""
VLLM_PROXY_CONFIGMAP, VLLM_PROXY_KEY = "vllm-pd-proxy", "toy_proxy_server.py"
VLLM_PROXY_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.10.1/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"
"""The proxy the NixlConnector guide runs, at the tag of the pinned vLLM image."""
ROUTER_CPU, ROUTER_MEMORY_GIB = 2, 4
"""The router holds no model: HTTP proxying and (SGLang) tokenizer-free policy state."""
KV_TRANSPORT_NOTE: dict[Engine, str] = {
    "vllm": "KV cache prefill -> decode over NIXL/UCX: RDMA when the pod sees an RDMA NIC, else TCP "
    "(UCX_TLS, UCX_NET_DEVICES pick); the plan's KV transfer time assumes recommend's --kv-transport",
    "sglang": "KV cache prefill -> decode over Mooncake (--disaggregation-transfer-backend; nixl is the "
    "other); the plan's KV transfer time assumes recommend's --kv-transport",
}
RDMA_NOTE: dict[Engine, str] = {
    "vllm": "for RDMA add your cluster's RDMA NIC resource to the engine container (its name depends on the "
    "device plugin) and set UCX_NET_DEVICES to its devices; RDMA usually needs IPC_LOCK, which this "
    "namespace's Pod Security 'restricted' forbids",
    "sglang": "for RDMA add your cluster's RDMA NIC resource to the engine container (its name depends on the "
    "device plugin) and --disaggregation-ib-device <its devices, e.g. mlx5_0>; RDMA usually needs IPC_LOCK, "
    "which this namespace's Pod Security 'restricted' forbids",
}
ROUTER_NOTE: dict[Engine, str] = {
    "vllm": f"vLLM's test proxy (toy_proxy_server.py), not a production router: create ConfigMap "
    f"{VLLM_PROXY_CONFIGMAP} (key {VLLM_PROXY_KEY}) from {VLLM_PROXY_SOURCE} before this pod can start; "
    "it reaches each pool through its headless Service (DNS picks the pod per connection)",
    "sglang": "sglang_router PD mode with Kubernetes service discovery of the prefill and decode pods "
    "(assumed installed in the SGLang image)",
}


def is_disaggregated(pools: Sequence[PoolDeployment]) -> bool:
    return any(p.role is not None for p in pools)


def _pair(pools: Sequence[PoolDeployment]) -> tuple[PoolDeployment, PoolDeployment]:
    by_role = {p.role: p for p in pools}
    if len(pools) != 2 or set(by_role) != {"prefill", "decode"}:
        raise ValueError("a disaggregated render needs one prefill and one decode pool")
    return by_role["prefill"], by_role["decode"]


def _host(pool_name: str, ns: str) -> str:
    return f"{pool_name}.{ns}.svc"


def worker_deployment(pool: PoolDeployment, engine: Engine, ns: str) -> Obj:
    """The pool's Deployment with the engine's disaggregation flags, its role label and the notes."""
    role = pool.role
    if role is None:
        raise ValueError(f"pool {pool.name} has no prefill/decode role")
    dep = deployment(pool, engine, ns)
    dep["metadata"]["labels"][ROLE_LABEL] = role
    template = dep["spec"]["template"]
    template["metadata"]["labels"][ROLE_LABEL] = role
    annotations = {KV_TRANSPORT_ANNOTATION: KV_TRANSPORT_NOTE[engine], RDMA_ANNOTATION: RDMA_NOTE[engine]}
    container = template["spec"]["containers"][0]
    container["command"] = [*container["command"], *disaggregation_flags(engine, role)]
    if engine == "vllm":
        container["env"] += [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
        ]
    elif role == "prefill":
        container["ports"].append(
            {"name": "bootstrap", "containerPort": SGLANG_BOOTSTRAP_PORT, "protocol": "TCP"}
        )
        annotations[SGLANG_BOOTSTRAP_ANNOTATION] = str(SGLANG_BOOTSTRAP_PORT)
    template["metadata"]["annotations"] = annotations
    return dep


def headless_service(pool: PoolDeployment, ns: str) -> Obj:
    """The pool's Service without a cluster IP: its DNS name lists the ready worker pods, on the
    engine's own port (no kube-proxy in between)."""
    svc = service(pool, ns)
    svc["metadata"]["labels"][ROLE_LABEL] = pool.role
    svc["spec"]["clusterIP"] = "None"
    svc["spec"]["ports"] = [{"name": "http", "port": CONTAINER_PORT, "targetPort": "http", "protocol": "TCP"}]
    return svc


def _router_labels(fleet: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": f"{fleet}-router",
        "app.kubernetes.io/part-of": fleet,
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def _router_selector(fleet: str) -> dict[str, str]:
    return {
        k: v
        for k, v in _router_labels(fleet).items()
        if k in ("app.kubernetes.io/name", "app.kubernetes.io/part-of")
    }


def _router_command(engine: Engine, prefill: PoolDeployment, decode: PoolDeployment, ns: str) -> list[str]:
    port = str(CONTAINER_PORT)
    if engine == "vllm":
        return [
            "python3",
            f"/proxy/{VLLM_PROXY_KEY}",
            *("--host", "0.0.0.0", "--port", port),
            *("--prefiller-hosts", _host(prefill.name, ns), "--prefiller-ports", port),
            *("--decoder-hosts", _host(decode.name, ns), "--decoder-ports", port),
        ]
    return [
        *("python3", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--service-discovery"),
        *("--prefill-selector", f"app.kubernetes.io/name={prefill.name}"),
        *("--decode-selector", f"app.kubernetes.io/name={decode.name}"),
        *("--service-discovery-namespace", ns, "--service-discovery-port", port),
        *("--host", "0.0.0.0", "--port", port),
    ]


def _router_container(engine: Engine, prefill: PoolDeployment, decode: PoolDeployment, ns: str) -> Obj:
    mounts: list[Obj] = [{"name": "tmp", "mountPath": "/tmp"}]
    if engine == "vllm":
        mounts.append({"name": "proxy", "mountPath": "/proxy", "readOnly": True})
    memory = f"{ROUTER_MEMORY_GIB}Gi"
    probe = {"tcpSocket": {"port": "http"}, "periodSeconds": 5, "failureThreshold": 3}
    return {
        "name": "router",
        "image": IMAGES[engine],
        "command": _router_command(engine, prefill, decode, ns),
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": {
            "requests": {"cpu": str(ROUTER_CPU), "memory": memory},
            "limits": {"cpu": str(2 * ROUTER_CPU), "memory": memory},
        },
        "volumeMounts": mounts,
        "securityContext": container_security_context(read_only_root=True),
        "readinessProbe": probe,
        "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
    }


def router_deployment(engine: Engine, prefill: PoolDeployment, decode: PoolDeployment, ns: str) -> Obj:
    fleet = decode.fleet
    volumes: list[Obj] = [{"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}}]
    if engine == "vllm":
        volumes.append({"name": "proxy", "configMap": {"name": VLLM_PROXY_CONFIGMAP, "optional": False}})
    pod: Obj = {
        "priorityClassName": f"gpuplan-{decode.tier}",
        "securityContext": pod_security_context(),
        "automountServiceAccountToken": engine == "sglang",
        **({"serviceAccountName": f"{fleet}-router"} if engine == "sglang" else {}),
        "containers": [_router_container(engine, prefill, decode, ns)],
        "volumes": volumes,
    }
    labels = _router_labels(fleet)
    template_meta = {"labels": dict(labels), "annotations": {ROUTER_ANNOTATION: ROUTER_NOTE[engine]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{fleet}-router", "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": _router_selector(fleet)},
            "template": {"metadata": template_meta, "spec": pod},
        },
    }


def router_service(fleet: str, ns: str) -> Obj:
    """What clients call: ``http://<plan name>`` on port 80, as an aggregated plan's Service."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": fleet, "namespace": ns, "labels": _router_labels(fleet)},
        "spec": {
            "type": "ClusterIP",
            "selector": _router_selector(fleet),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def router_rbac(fleet: str, ns: str) -> list[Obj]:
    """ServiceAccount, Role and RoleBinding that let SGLang's router watch the namespace's pods
    (its service discovery; EndpointSlices too, which newer router releases watch instead)."""
    name, labels = f"{fleet}-router", _router_labels(fleet)
    meta = {"name": name, "namespace": ns, "labels": labels}
    verbs = ["get", "list", "watch"]
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": verbs},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": verbs},
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": dict(meta),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": dict(meta),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    ]


def render_disaggregated(
    pools: Sequence[PoolDeployment], engine: Engine, *, ns: str = "gpuplan", bench_image: str | None = None
) -> dict[str, list[Obj]]:
    """File name -> objects of a prefill and a decode pool and their router, in apply order; an
    engine without a disaggregated mode is refused."""
    require_disaggregation(engine)
    prefill, decode = _pair(pools)
    fleet = decode.fleet
    tiers = {prefill.tier, decode.tier}
    files: dict[str, list[Obj]] = {
        "00-namespace.yaml": [namespace(ns)],
        "01-priorityclasses.yaml": [priority_class(t) for t in PRIORITY if t in tiers],
    }
    for pool in (prefill, decode):
        files[f"10-{pool.name}.yaml"] = [
            worker_deployment(pool, engine, ns),
            headless_service(pool, ns),
            disruption_budget(pool, ns),
        ]
    rbac = router_rbac(fleet, ns) if engine == "sglang" else []
    router = [router_deployment(engine, prefill, decode, ns), router_service(fleet, ns)]
    files[f"20-{fleet}-router.yaml"] = [*rbac, *router]
    if bench_image:
        front = decode.model_copy(update={"name": fleet})  # the benchmark calls the router's Service
        files["90-bench-job.yaml"] = [bench_job([front], fleet, ns, bench_image)]
    return files

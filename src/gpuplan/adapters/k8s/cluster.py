"""Talk to a cluster with the official ``kubernetes`` client: read the GPU inventory, apply objects.

Only a few endpoints are used (``GET /api/v1/nodes``, ``GET /api/v1/pods``, and server-side apply
``PATCH <object path>?fieldManager=gpuplan&force=true[&dryRun=All]`` with
``Content-Type: application/apply-patch+yaml``), through ``ApiClient`` so that kubeconfig auth
(tokens, client certificates, exec plugins) and in-cluster service accounts work unchanged.
``apply`` dry-runs every object first and applies nothing unless all pass.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.k8s.inventory import ClusterInventory, build_inventory
from gpuplan.core.errors import GpuplanError, UserInputError

REQUEST_TIMEOUT_S = (5.0, 30.0)
"""(connect, read) seconds per API call."""
FIELD_MANAGER = "gpuplan"
DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"
RESOURCES: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "Service"): ("/api/v1", "services", True),
    ("v1", "Secret"): ("/api/v1", "secrets", True),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "rolebindings",
        True,
    ),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments", True),
    ("policy/v1", "PodDisruptionBudget"): ("/apis/policy/v1", "poddisruptionbudgets", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("batch/v1", "Job"): ("/apis/batch/v1", "jobs", True),
}
"""(apiVersion, kind) -> (API prefix, plural, namespaced): the kinds ``gpuplan k8s render`` writes."""


class ClusterError(GpuplanError):
    """The API server refused or could not be reached (exit 1: fix the kubeconfig / the objects)."""

    exit_code = 1


def _kubeconfig_path(kubeconfig: Path | None) -> Path | None:
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            what = "is a folder, not a file" if kubeconfig.is_dir() else "not found"
            raise UserInputError(f"kubeconfig {kubeconfig} {what}", hint="pass an existing --kubeconfig file")
        return kubeconfig
    env = os.environ.get("KUBECONFIG", "")
    first = next((Path(p) for p in env.split(os.pathsep) if p), None)
    if first is not None:
        if not first.is_file():
            raise UserInputError(f"kubeconfig {first} (from $KUBECONFIG) not found", hint="fix KUBECONFIG")
        return first
    return DEFAULT_KUBECONFIG if DEFAULT_KUBECONFIG.is_file() else None


def api_client(kubeconfig: Path | None = None, context: str | None = None) -> Any:
    """An ``ApiClient`` from a kubeconfig ($KUBECONFIG, ~/.kube/config) or the in-cluster service account."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = _kubeconfig_path(kubeconfig)
    try:
        if path is not None:
            return config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(path), context=context, persist_config=False
            )
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return client.ApiClient(cfg)
    except ConfigException as exc:
        raise UserInputError(f"kubeconfig {path or '(in-cluster)'}: {str(exc).splitlines()[0]}") from None
    except (yaml.YAMLError, UnicodeDecodeError, TypeError, AttributeError, KeyError) as exc:
        # the client parses the file itself and fails with these on YAML that is not a kubeconfig mapping
        raise UserInputError(
            f"kubeconfig {path}: not a kubeconfig YAML mapping ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            hint="check the file: clusters, users and contexts as written by kubectl",
        ) from None
    raise UserInputError(
        f"no kubeconfig: --kubeconfig not given, $KUBECONFIG unset, {DEFAULT_KUBECONFIG} missing, not in a cluster",
        hint="pass --kubeconfig PATH",
    )


def _request(
    api: Any, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: Any = None
) -> Any:
    """One API call; the decoded JSON body, or ClusterError with the server's message."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/apply-patch+yaml"
    host = api.configuration.host
    try:
        args = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api.call_api(*args, _request_timeout=REQUEST_TIMEOUT_S)
        raw = resp.read()
    except Exception as exc:  # urllib3 / ssl / ApiException: all mean "no answer"
        raise ClusterError(
            f"cannot reach the API server {host}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    data = _json(raw)
    if not 200 <= resp.status < 300:
        message = data.get("message") if isinstance(data, dict) else None
        raise ClusterError(f"{method} {path}: HTTP {resp.status}: {message or raw[:200]!r}")
    return data


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return None


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def read_inventory(api: Any, catalog: Catalog | None) -> ClusterInventory:
    """GPU nodes, their allocatable GPUs / MIG slices, and what running pods use."""
    nodes = _request(api, "GET", "/api/v1/nodes")
    pods = _request(
        api, "GET", "/api/v1/pods", query=[("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed")]
    )
    return build_inventory(
        (nodes or {}).get("items", []),
        (pods or {}).get("items", []),
        catalog=catalog,
        server=api.configuration.host,
    )


def object_path(obj: dict[str, Any]) -> str:
    """The REST path of an object; UserInputError for a kind gpuplan does not apply."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in RESOURCES:
        kinds = ", ".join(k for _, k in RESOURCES)
        raise UserInputError(f"cannot apply {key[1]} ({key[0]}): gpuplan applies only {kinds}")
    prefix, plural, namespaced = RESOURCES[key]
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise UserInputError(f"{key[1]} without metadata.name")
    if namespaced:
        return f"{prefix}/namespaces/{meta.get('namespace') or 'default'}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def _apply_one(api: Any, obj: dict[str, Any], *, dry_run: bool) -> None:
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
    _request(api, "PATCH", object_path(obj), query=query, body=obj)


def apply_objects(api: Any, objects: Sequence[dict[str, Any]]) -> list[str]:
    """Server-side dry-run of every object, then apply; nothing is applied unless every dry-run passes."""
    for obj in objects:
        object_path(obj)
    failures: dict[
        str, list[str]
    ] = {}  # message -> objects: an unreachable server is one line, not one per object
    for obj in objects:
        try:
            _apply_one(api, obj, dry_run=True)
        except ClusterError as exc:
            failures.setdefault(exc.message, []).append(f"{obj['kind']}/{obj['metadata']['name']}")
    if failures:
        failed = sum(len(names) for names in failures.values())
        parts = [
            f"{', '.join(names[:3])}{' …' if len(names) > 3 else ''}: {message}"
            for message, names in failures.items()
        ]
        raise ClusterError(
            f"server-side dry-run rejected {failed} of {len(objects)} objects, nothing applied: "
            + "; ".join(parts[:3])
        )
    applied: list[str] = []
    for obj in objects:
        try:
            _apply_one(api, obj, dry_run=False)
        except ClusterError as exc:
            raise ClusterError(
                f"applied {len(applied)} of {len(objects)} objects, then {obj['kind']}/{obj['metadata']['name']} "
                f"failed: {exc.message}",
                hint="re-run apply once the cause is fixed (server-side apply is idempotent)",
            ) from None
        applied.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return applied

"""Check rendered objects against the official Kubernetes OpenAPI schemas (``kubernetes-validate``)
and against the Pod Security "restricted" rules the manifests rely on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuplan.core.errors import DataError

SCHEMA_VERSION = "1.33.0"
"""Kubernetes version whose schemas the manifests are checked against (released April 2025)."""


ALLOWED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
"""Volume types the "restricted" profile allows (kubernetes.io/docs/concepts/security/pod-security-standards)."""


def schema_available() -> bool:
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        return False
    return True


def validate_schema(objects: Iterable[dict[str, Any]], *, version: str = SCHEMA_VERSION) -> None:
    """DataError naming the object and the first schema violation (strict: unknown fields fail)."""
    import kubernetes_validate

    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
            raise DataError(f"{where} fails the Kubernetes {version} schema: {exc.message}") from None
        except kubernetes_validate.SchemaNotFoundError:
            where = f"{obj.get('apiVersion')} {obj.get('kind')}"
            raise DataError(f"{where} has no Kubernetes {version} schema") from None


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec", {})
    template = spec.get("template") if isinstance(spec, dict) else None
    return template.get("spec") if isinstance(template, dict) else None


def _container_violations(c: dict[str, Any], pod_ctx: dict[str, Any]) -> list[str]:
    ctx = c.get("securityContext", {})
    checks = {
        "privileged": bool(ctx.get("privileged")),
        "allowPrivilegeEscalation": ctx.get("allowPrivilegeEscalation") is not False,
        "capabilities not dropped": "ALL" not in ctx.get("capabilities", {}).get("drop", []),
        "runAsNonRoot": not (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")),
        "runAsUser 0": ctx.get("runAsUser") == 0 or pod_ctx.get("runAsUser") == 0,
    }
    return [f"{c['name']}: {rule}" for rule, broken in checks.items() if broken]


def restricted_violations(obj: dict[str, Any]) -> list[str]:
    """Rules of the Pod Security Standards "restricted" profile that a pod template breaks."""
    pod = _pod_spec(obj)
    if pod is None:
        return []
    out = []
    pod_ctx = pod.get("securityContext", {})
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        out.append("host namespaces")
    for vol in pod.get("volumes", []):
        kinds = set(vol) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            out.append(f"volume {vol['name']} type {sorted(kinds)}")
    if pod_ctx.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        out.append("pod seccompProfile")
    for c in pod.get("containers", []):
        out += _container_violations(c, pod_ctx)
    return out

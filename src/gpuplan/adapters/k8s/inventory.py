"""The GPU inventory of a cluster, from the Node and Pod objects the API returns (plain dicts).

Per node and GPU resource (``nvidia.com/gpu`` or a MIG ``nvidia.com/mig-<profile>``): allocatable,
used by running pods (limits of non-terminated pods bound to the node), and the part of that used
by gpuplan's own pools. ``available`` = allocatable − used by others: what a re-plan may count as
owned (gpuplan's pools are being re-planned, so their GPUs count as available).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.catalog.product_names import gpu_from_label
from gpuplan.adapters.k8s.labels import (
    GPU_RESOURCE,
    MEMORY_LABEL,
    MIG_RESOURCE_PREFIX,
    PRODUCT_LABEL,
)
from gpuplan.core.errors import GpuplanError
from gpuplan.core.frozen import FrozenModel

DONE_PHASES = ("Succeeded", "Failed")
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"


class NodeGpus(FrozenModel):
    node: str
    product: str
    gpu: str | None
    memory_mib: int | None
    mig_profile: str | None
    allocatable: int
    used: int
    used_by_gpuplan: int


class InventoryTotal(FrozenModel):
    product: str
    gpu: str | None
    mig_profile: str | None
    nodes: int
    allocatable: int
    used: int
    used_by_gpuplan: int
    available: int


class ClusterInventory(FrozenModel):
    server: str
    nodes: list[NodeGpus]
    totals: list[InventoryTotal]


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _gpu_resources(resources: Mapping[str, Any]) -> dict[str, int]:
    return {
        k: _int(v) for k, v in resources.items() if k == GPU_RESOURCE or k.startswith(MIG_RESOURCE_PREFIX)
    }


def _usage(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    """(node, resource) -> (used, used by gpuplan)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if not node or pod.get("status", {}).get("phase") in DONE_PHASES:
            continue
        ours = pod.get("metadata", {}).get("labels", {}).get(MANAGED_BY_LABEL) == "gpuplan"
        for c in pod.get("spec", {}).get("containers", []):
            limits = c.get("resources", {}).get("limits", {}) or c.get("resources", {}).get("requests", {})
            for res, n in _gpu_resources(limits or {}).items():
                used, mine = out.get((node, res), (0, 0))
                out[(node, res)] = (used + n, mine + (n if ours else 0))
    return out


def _catalog_id(catalog: Catalog | None, product: str) -> str | None:
    if catalog is None:
        return None
    try:
        return gpu_from_label(catalog, product)[0].id
    except GpuplanError:
        return None


def build_inventory(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    catalog: Catalog | None,
    server: str = "",
) -> ClusterInventory:
    usage = _usage(pods)
    rows = []
    for node in nodes:
        meta, status = node.get("metadata", {}), node.get("status", {})
        labels = meta.get("labels", {}) or {}
        product = labels.get(PRODUCT_LABEL, "unknown")
        base = product.split("-MIG-")[0]
        memory = labels.get(MEMORY_LABEL)
        for res, n in sorted(_gpu_resources(status.get("allocatable", {}) or {}).items()):
            used, mine = usage.get((meta.get("name", ""), res), (0, 0))
            profile = res[len(MIG_RESOURCE_PREFIX) :] if res.startswith(MIG_RESOURCE_PREFIX) else None
            rows.append(
                NodeGpus(
                    node=meta.get("name", ""),
                    product=base,
                    gpu=_catalog_id(catalog, base),
                    memory_mib=_int(memory) if memory else None,
                    mig_profile=profile,
                    allocatable=n,
                    used=used,
                    used_by_gpuplan=mine,
                )
            )
    return ClusterInventory(server=server, nodes=rows, totals=_totals(rows))


def _totals(rows: list[NodeGpus]) -> list[InventoryTotal]:
    keys = sorted({(r.product, r.mig_profile or "") for r in rows})
    out = []
    for product, profile in keys:
        group = [r for r in rows if r.product == product and (r.mig_profile or "") == profile]
        alloc, used, mine = (
            sum(getattr(r, f) for r in group) for f in ("allocatable", "used", "used_by_gpuplan")
        )
        out.append(
            InventoryTotal(
                product=product,
                gpu=group[0].gpu,
                mig_profile=profile or None,
                nodes=len({r.node for r in group}),
                allocatable=alloc,
                used=used,
                used_by_gpuplan=mine,
                available=max(alloc - (used - mine), 0),
            )
        )
    return out

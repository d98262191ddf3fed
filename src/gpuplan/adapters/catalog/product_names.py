"""GPUs by the product name the driver reports: ``nvidia-smi`` names as Kubernetes node labels.

GPU Feature Discovery labels each GPU node with ``nvidia.com/gpu.product``, the ``nvidia-smi`` name
with spaces as ``-`` (``NVIDIA-A100-SXM4-80GB``, ``Tesla-T4``), and with the MIG "single" strategy a
``-MIG-1g.10gb`` suffix (https://github.com/NVIDIA/gpu-feature-discovery). The catalog keeps those
names as aliases, so it is the catalog that answers "which GPU is this label".
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.errors import UnknownNameError, UserInputError
from gpuplan.core.hardware import GpuSpec

__all__ = ["MIG_LABEL_INFIX", "VENDOR_PREFIXES", "gpu_from_label", "product_label"]

MIG_LABEL_INFIX = "-MIG-"
"""Between the product and the MIG profile in a "single"-strategy label."""
VENDOR_PREFIXES = ("NVIDIA ", "Tesla ")
"""Catalog aliases that are nvidia-smi names (``NVIDIA A100-SXM4-80GB``, ``Tesla T4``)."""


def product_label(gpu: GpuSpec) -> str:
    """The ``nvidia.com/gpu.product`` value GFD sets on nodes with this GPU."""
    name = next((a for a in gpu.aliases if a.startswith(VENDOR_PREFIXES)), f"NVIDIA {gpu.id}")
    return name.replace(" ", "-")


def gpu_from_label(catalog: Catalog, label: str) -> tuple[GpuSpec, str | None]:
    """Catalog GPU (and MIG profile, "single" strategy) of a product label or id; one-line error if unknown."""
    base, _, profile = label.partition(MIG_LABEL_INFIX)
    try:
        gpu = catalog.get_gpu(base)
    except UnknownNameError:
        by_label = {product_label(catalog.gpus[g]).lower(): g for g in catalog.gpu_ids()}
        gid = by_label.get(base.lower())
        if gid is None:
            raise UnknownNameError(
                "GPU product label",
                label,
                [product_label(catalog.gpus[g]) for g in catalog.gpu_ids()],
                hint="add the GPU to the catalog (--catalog) with this nvidia-smi name as an alias",
            ) from None
        gpu = catalog.gpus[gid]
    if profile and profile not in {p.name for p in gpu.mig_profiles}:
        raise UserInputError(f"MIG profile {profile!r} in label {label!r} is not offered by {gpu.id}")
    return gpu, profile or None

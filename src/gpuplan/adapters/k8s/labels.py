"""GPU Feature Discovery labels and NVIDIA device-plugin resources (the GPU a label names is the catalog's
answer: :mod:`gpuplan.adapters.catalog.product_names`).

GFD labels each GPU node with ``nvidia.com/gpu.product`` (the ``nvidia-smi`` name with spaces as
``-``, e.g. ``NVIDIA-A100-SXM4-80GB``, ``Tesla-T4``; with the MIG "single" strategy a
``-MIG-1g.10gb`` suffix) and ``nvidia.com/gpu.memory`` (MiB). The device plugin exposes
``nvidia.com/gpu`` and, with the MIG "mixed" strategy, ``nvidia.com/mig-<profile>``
(https://github.com/NVIDIA/gpu-feature-discovery, https://docs.nvidia.com/datacenter/cloud-native/
gpu-operator/latest/gpu-operator-mig.html).
"""

from __future__ import annotations

__all__ = [
    "COUNT_LABEL",
    "GPU_RESOURCE",
    "MEMORY_LABEL",
    "MIG_RESOURCE_PREFIX",
    "PRODUCT_LABEL",
    "mig_resource",
]

PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_resource(profile: str) -> str:
    return f"{MIG_RESOURCE_PREFIX}{profile}"

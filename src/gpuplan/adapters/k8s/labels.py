"""Node labels and device-plugin resources per GPU vendor (the GPU a label names is the catalog's
answer: :mod:`gpuplan.adapters.catalog.product_names`).

NVIDIA: GPU Feature Discovery labels each GPU node with ``nvidia.com/gpu.product`` (the ``nvidia-smi``
name with spaces as ``-``, e.g. ``NVIDIA-A100-SXM4-80GB``, ``Tesla-T4``; with the MIG "single" strategy a
``-MIG-1g.10gb`` suffix) and ``nvidia.com/gpu.memory`` (MiB). The device plugin exposes
``nvidia.com/gpu`` and, with the MIG "mixed" strategy, ``nvidia.com/mig-<profile>``
(https://github.com/NVIDIA/gpu-feature-discovery, https://docs.nvidia.com/datacenter/cloud-native/
gpu-operator/latest/gpu-operator-mig.html).

AMD: the device plugin exposes ``amd.com/gpu`` (https://instinct.docs.amd.com/projects/k8s-device-plugin/
en/latest/). Its node labeller (``-product-name``, as the AMD GPU operator runs it) sets
``amd.com/gpu.product-name`` (and the older ``beta.amd.com/gpu.product-name``) on a node whose GPUs are
all one product, to the driver's ``product_name`` with parentheses dropped and every character outside
``[A-Za-z0-9._-]`` (spaces included) as ``_`` (``createLabels`` / ``sanitizeLabelValue``,
cmd/k8s-node-labeller/main.go, https://github.com/ROCm/k8s-device-plugin). Boards report
``AMD Instinct MI300X`` or ``AMD Instinct MI300X OAM``, so a pool matches any ``AMD Instinct`` alias the
catalog holds for its GPU; its memory needs no label (one product, one memory size).
"""

from __future__ import annotations

import re

from gpuplan.core.hardware import GpuSpec

__all__ = [
    "AMD_GPU_RESOURCE",
    "AMD_PRODUCT_LABEL",
    "AMD_PRODUCT_MAX_CHARS",
    "AMD_PRODUCT_PREFIX",
    "COUNT_LABEL",
    "GPU_RESOURCE",
    "MEMORY_LABEL",
    "MIG_RESOURCE_PREFIX",
    "PRODUCT_LABEL",
    "amd_product_labels",
    "mig_resource",
]

PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
AMD_GPU_RESOURCE = "amd.com/gpu"
AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
AMD_PRODUCT_PREFIX = "AMD Instinct "
"""Catalog aliases that are the driver's product names."""
AMD_PRODUCT_MAX_CHARS = 63 - len("gpu.product-name.")
"""The labeller's cut (``productNameMaxLen``): ``beta.amd.com/gpu.product-name.<value>`` keys stay within 63."""


def mig_resource(profile: str) -> str:
    return f"{MIG_RESOURCE_PREFIX}{profile}"


def _sanitised(name: str) -> str:
    """``name`` as the AMD labeller writes a label value (module docstring)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "_", name.strip().replace("(", "").replace(")", ""))
    return value[:AMD_PRODUCT_MAX_CHARS].strip("._-")


def amd_product_labels(gpu: GpuSpec) -> tuple[str, ...]:
    """The ``amd.com/gpu.product-name`` values of nodes with this GPU, one per product-name alias."""
    names = [a for a in gpu.aliases if a.startswith(AMD_PRODUCT_PREFIX)] or [f"{AMD_PRODUCT_PREFIX}{gpu.id}"]
    return tuple(dict.fromkeys(_sanitised(n) for n in names))

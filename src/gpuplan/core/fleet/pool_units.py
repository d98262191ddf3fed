"""Pool units: a whole GPU, or one MIG slice of a GPU seen as a smaller GPU.

A MIG slice (``1g.10gb`` ...) gets the profile's ``compute_fraction`` of the parent's tensor peaks and
memory bandwidth (its share of SMs and memory controllers) and the profile's memory; it has no
NVLink or peer links, so a replica lives on one slice (tp = pp = 1). Its price is the parent's
GPU-hour divided by ``max_instances`` of that profile: a GPU partitioned into identical slices
(NVIDIA MIG user guide, "Supported MIG profiles": the profile table lists how many fit per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.errors import UserInputError
from gpuplan.core.hardware import DenseTflops, GpuSpec, MigProfile
from gpuplan.core.perf.memory import usable_memory_bytes
from gpuplan.core.recommend.request import GpuOffer

MIG_SEPARATOR = "/"
"""Unit ids of slices: ``<gpu id>/<profile>``, e.g. ``A100-80GB-SXM/1g.10gb``."""
SLICE_ID_INFIX = ".mig-"
"""Catalog-style id of the derived slice spec (ids allow letters, digits, '.' and '-')."""


@dataclass(frozen=True)
class PoolUnit:
    """What one pool is made of: ``gpus_per_unit`` of a physical GPU, priced per unit-hour."""

    id: str
    parent: GpuSpec
    mig: MigProfile | None
    offer: GpuOffer

    @property
    def gpus_per_unit(self) -> float:
        """Physical GPUs one unit occupies (1, or 1 / max_instances for a slice)."""
        return 1.0 / self.mig.max_instances if self.mig else 1.0

    @property
    def is_mig(self) -> bool:
        return self.mig is not None


def whole_gpu_unit(offer: GpuOffer) -> PoolUnit:
    return PoolUnit(id=offer.gpu.id, parent=offer.gpu, mig=None, offer=offer)


def mig_unit(offer: GpuOffer, profile_name: str) -> PoolUnit:
    """The slice ``profile_name`` of ``offer``'s GPU; UserInputError if the GPU does not offer it."""
    gpu = offer.gpu
    profile = next((p for p in gpu.mig_profiles if p.name == profile_name), None)
    if profile is None:
        offered = ", ".join(p.name for p in gpu.mig_profiles) or "none (no MIG support)"
        raise UserInputError(
            f"MIG profile {profile_name!r} is not offered by {gpu.id} (offers: {offered})",
            hint="use one of the listed profiles or a whole GPU",
        )
    price = offer.usd_per_gpu_hour / profile.max_instances if offer.usd_per_gpu_hour else None
    sliced = slice_spec(gpu, profile)
    return PoolUnit(
        id=f"{gpu.id}{MIG_SEPARATOR}{profile.name}",
        parent=gpu,
        mig=profile,
        offer=GpuOffer(
            gpu=sliced,
            usd_per_gpu_hour=price,
            price_source=f"{offer.price_source} / {profile.max_instances} slices".strip(),
            purchase_usd=offer.purchase_usd / profile.max_instances if offer.purchase_usd else None,
            price_quote=offer.price_quote,
            price_missing=offer.price_missing,
        ),
    )


def slice_spec(gpu: GpuSpec, profile: MigProfile) -> GpuSpec:
    """The GPU a slice looks like to the performance model."""
    frac = profile.compute_fraction
    peaks = gpu.dense_tflops.model_dump()
    scaled = {k: (v * frac if v is not None else None) for k, v in peaks.items()}
    usable = usable_memory_bytes(gpu) * profile.memory_bytes / gpu.memory_bytes
    return gpu.model_copy(
        update={
            "id": f"{gpu.id}{SLICE_ID_INFIX}{profile.name}",
            "memory_bytes": profile.memory_bytes,
            "usable_memory_bytes": usable,
            "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s * frac,
            "dense_tflops": DenseTflops(**scaled),
            "interconnect": gpu.interconnect.model_copy(update={"scale_up_domain_gpus": 1}),
            "tdp_watts": gpu.tdp_watts * frac if gpu.tdp_watts else None,
            "mig_profiles": (),
            "aliases": (),
        }
    )


def parse_mig_ref(ref: str) -> tuple[str, str]:
    """``"A100-80GB-SXM/1g.10gb"`` -> (gpu, profile); UserInputError on another shape."""
    gpu, sep, profile = ref.partition(MIG_SEPARATOR)
    if not sep or not gpu.strip() or not profile.strip():
        raise UserInputError(
            f"mig_profiles entry {ref!r} is not GPU/profile", hint="e.g. A100-80GB-SXM/1g.10gb"
        )
    return gpu.strip(), profile.strip()

"""Device rates the step models read: the dense peak of a GEMM path, the 16-bit attention peak, the
power cap of a board below its same-die reference, and the link a tensor-parallel group uses."""

from __future__ import annotations

from gpuplan.core.dtypes import DType
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.units import TFLOPS

LOW_PRECISION_KEYS = frozenset({"fp8", "int8", "fp4"})


def compute_peak_flops(gpu: GpuSpec, weight_dtype: DType) -> tuple[float, bool]:
    """Dense peak (FLOP/s) of the GEMM path for ``weight_dtype`` and whether it is a low-precision path."""
    for key in (weight_dtype.compute_key, weight_dtype.fallback_compute_key, "fp16"):
        value = gpu.tflops(key)
        if value is not None:
            return value * TFLOPS, key in LOW_PRECISION_KEYS
    return gpu.dense_tflops.fp32 * TFLOPS, False


def sixteen_bit_peak_flops(gpu: GpuSpec) -> float:
    """Dense 16-bit tensor peak: attention (softmax(QK^T)V) runs in 16 bits in every engine here."""
    return gpu.sixteen_bit_tflops * TFLOPS


def power_limited_fraction(gpu: GpuSpec) -> float:
    """Share of the spec tensor peak a power-capped board could hold in long GEMMs, before the fitted
    exponent (``Calibration.power_limit_exponent``) softens it.

    At the GEMM-saturating regime board power ~ FLOP rate x energy per FLOP, and energy per FLOP is a
    property of the die, so the same-die sibling that runs its spec peak within its TDP
    (``GpuSpec.power_reference``, the SXM board) fixes it. A board with TDP ``P`` and spec peak ``F``
    then sustains at most ``(P / P_ref) / (F / F_ref)`` of ``F`` (H100-NVL: (400/700) / (835.5/989.5)
    = 0.68; A100-80GB-PCIe: 300/400 = 0.75). Lower clocks also lower the voltage, so the real loss is
    smaller than this linear bound: the exponent, fitted on the PCIe/NVL rows, says how much.
    """
    ref = gpu.power_reference
    if ref is None or gpu.tdp_watts is None:
        return 1.0
    return min(1.0, (gpu.tdp_watts / ref.tdp_watts) / (gpu.sixteen_bit_tflops / ref.bf16_tflops))


def power_cap(gpu: GpuSpec, exponent: float) -> float:
    """The fitted share of the spec tensor peak a board holds: ``power_limited_fraction ** exponent``
    (``Calibration.power_limit_exponent``); 1 for boards that are not power-capped."""
    return float(power_limited_fraction(gpu) ** exponent)


PCIE_GEN3_BYTES_PER_S = 32e9
"""Fallback host link (PCIe 3.0 x16, bidirectional) when the catalog gives none."""


def tp_link(gpu: GpuSpec, tp: int) -> tuple[str, float]:
    """(link kind, one-direction bytes/s) carrying TP traffic: the scale-up fabric when the TP group
    fits in its domain (NVLink bridges join only 2-4 GPUs), else PCIe."""
    ic = gpu.interconnect
    if tp <= ic.scale_up_domain_gpus and ic.scale_up_bytes_per_s > 0 and ic.scale_up != "pcie":
        return (
            "nvlink" if ic.scale_up.startswith("nvlink") or ic.scale_up == "c2c" else ic.scale_up,
            ic.scale_up_bytes_per_s / 2,
        )
    return "pcie", (ic.pcie_bytes_per_s or PCIE_GEN3_BYTES_PER_S) / 2

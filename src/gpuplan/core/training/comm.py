"""Which link a parallel group uses and how long its collectives take (ring algorithms).

Ranks are ordered TP (innermost) → CP → EP/DP → PP (Megatron-Core's default order), so a group
whose extent ``stride × size`` fits in the scale-up domain talks over NVLink/xGMI, one that fits in
an 8-GPU server without NVLink over PCIe, and anything larger over the scale-out network
(InfiniBand/RoCE, one NIC per GPU). Ring times (Patarasuk & Yuan 2009): all-reduce moves
``2(n−1)/n·M`` bytes per GPU in ``2(n−1)`` steps, all-gather and reduce-scatter ``(n−1)/n·M`` in
``n−1`` steps; across nodes NCCL's hierarchical rings pay latency ~ log2(n) steps. Expert-parallel
all-to-alls are in ``core.training.moe``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.perf.peaks import tp_link


@dataclass(frozen=True)
class Link:
    """A group's link: kind, achieved one-direction bytes/s, per-step latency."""

    kind: str
    bytes_per_s: float
    latency_s: float


def group_link(gpu: GpuSpec, extent: int, cal: TrainingCalibration) -> Link:
    """The link a group spanning ``extent`` consecutive ranks uses (module docstring)."""
    if extent > gpu.interconnect.node_gpus:
        return Link("ib", cal.ib_bytes_per_s_per_gpu * cal.link_efficiency, cal.hop_latency("ib"))
    kind, bw = tp_link(gpu, max(extent, 1))
    return Link(kind, bw * cal.link_efficiency, cal.hop_latency(kind))


def _steps(n: int, link: Link) -> float:
    return 2.0 * math.ceil(math.log2(n)) if link.kind == "ib" else float(n - 1)


def allreduce_s(message_bytes: float, n: int, link: Link) -> float:
    """Ring all-reduce of ``message_bytes`` over ``n`` ranks."""
    if n <= 1:
        return 0.0
    return 2.0 * (n - 1) / n * message_bytes / link.bytes_per_s + 2.0 * _steps(n, link) * link.latency_s


def allgather_s(message_bytes: float, n: int, link: Link) -> float:
    """Ring all-gather (or reduce-scatter) of a ``message_bytes`` full buffer over ``n`` ranks."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * message_bytes / link.bytes_per_s + _steps(n, link) * link.latency_s

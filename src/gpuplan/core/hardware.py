"""Typed, frozen catalog records. Field names carry their unit; every number carries a source URL.

A GPU file (``gpuplan/data/catalog/gpus/<id>.yaml``) is one :class:`GpuSpec`. ``sources`` maps each
numeric field (dotted path, or a group such as ``dense_tflops`` that covers all its keys) to the URL it
was read from; the validator refuses a number without a source. Prices live in
``gpuplan/data/catalog/prices.csv`` (one :class:`PriceEntry` per row) so that a user can override them
without touching specs.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, HttpUrl, model_validator

from gpuplan.core.frozen import FiniteModel

Vendor = Literal["NVIDIA", "AMD", "Intel"]
Family = Literal["turing", "volta", "ampere", "ada", "hopper", "blackwell", "cdna3", "gaudi"]
LinkKind = Literal["nvlink", "nvlink-bridge", "xgmi", "pcie", "c2c"]
MAX_GPU_COUNT = 200_000
"""Most GPUs one plan, deployment or training job may use: the size of the largest published single
cluster, xAI Colossus in Memphis (100,000 H100s at its start in July 2024, 200,000 H100/H200 by 2025:
https://www.teslarati.com/xai-supercomputer-memphis-upgraded-1-million-gpus/; Meta's Llama 3 clusters
are 24,576). Scenario documents, flags and web bodies are bounded by it, so a count is a one-line
error, not hours of work (``train-plan --max-gpus 100000`` for a 70B model: 3.9 s)."""
MAX_PARALLEL_DEGREE = 1_024
"""Most ranks of one TP, PP or EP group (the bound layouts always had): 14x the largest NVLink
domain sold, GB200 NVL72's 72 GPUs (the catalog's largest is 8); published layouts stay far below."""

PriceKind = Literal["on_demand", "spot", "reserved_1y", "reserved_3y", "capacity_block", "purchase"]


class DenseTflops(FiniteModel):
    """Dense (no 2:4 sparsity) tensor-core peaks in TFLOPS (TOPS for int8). ``None`` = no such path."""

    fp32: float = Field(gt=0, description="non-tensor FP32 vector peak")
    tf32: float | None = Field(default=None, gt=0)
    fp16: float = Field(gt=0, description="FP16 tensor peak with FP32 accumulate")
    bf16: float | None = Field(default=None, gt=0)
    fp8: float | None = Field(default=None, gt=0)
    int8: float | None = Field(default=None, gt=0)
    fp4: float | None = Field(default=None, gt=0)


SERVER_GPUS = 8
"""GPUs in one server unless the catalog says fewer (HGX/DGX and 8-slot PCIe servers such as AWS
g6e.48xlarge): TP may span a server's GPUs even where the scale-up domain is smaller (PCIe boards,
NVLink pairs)."""


class Interconnect(FiniteModel):
    """GPU-to-GPU and host links. Bandwidths are bidirectional per GPU, bytes/s (NVIDIA's convention)."""

    scale_up: LinkKind = Field(description="the fastest GPU-to-GPU link inside a node")
    scale_up_bytes_per_s: float = Field(ge=0, description="bidirectional per-GPU scale-up bandwidth")
    scale_up_domain_gpus: int = Field(ge=1, description="GPUs that share the scale-up fabric (8 for HGX)")
    pcie_gen: int | None = Field(default=None, ge=3, le=6)
    pcie_bytes_per_s: float | None = Field(default=None, gt=0, description="bidirectional x16")
    server_gpus: int | None = Field(
        default=None, ge=1, description="GPUs in one server when fewer than 8 (a superchip node: 1)"
    )

    @property
    def node_gpus(self) -> int:
        """GPUs one server holds: ``server_gpus``, else the scale-up domain or ``SERVER_GPUS``, the larger."""
        return self.server_gpus or max(self.scale_up_domain_gpus, SERVER_GPUS)


class MigProfile(FiniteModel):
    """One NVIDIA MIG instance profile (``1g.10gb`` …) and how many fit on one GPU."""

    name: str
    memory_bytes: float = Field(gt=0)
    compute_fraction: float = Field(gt=0, le=1, description="share of the GPU's SMs (g / 7)")
    max_instances: int = Field(ge=1)


MAX_SIBLING_PEAK_RATIO = 2.0
"""Same-die boards differ in clocks and enabled units, never by more than 2x in peak (H100 PCIe vs
SXM: 1.31x; A100 PCIe vs SXM: 1x)."""


class PowerReference(FiniteModel):
    """A sibling part on the same die that runs at its spec clocks within its TDP (the SXM board).

    A board with a lower TDP than its sibling but a higher spec peak per watt cannot hold its spec
    clocks in long GEMMs: dynamic power is about (FLOP rate x energy per FLOP), and energy per FLOP is
    a property of the die. ``gpuplan.core.perf.roofline.power_limited_fraction`` turns the two TDPs and
    peaks into the share of the spec peak the board sustains.
    """

    gpu: str = Field(description="id of the sibling (e.g. H100-SXM for H100-PCIe)")
    tdp_watts: float = Field(gt=0, description="the sibling's TDP")
    bf16_tflops: float = Field(gt=0, description="the sibling's dense 16-bit tensor peak")


class GpuSpec(FiniteModel):
    """One accelerator SKU, in SI units."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.\-]*$")
    vendor: Vendor
    family: Family
    architecture: str
    launch_year: int = Field(ge=2015, le=2030)
    form_factor: str
    memory_bytes: float = Field(gt=0, description="vendor capacity in decimal bytes (80 GB = 80e9)")
    usable_memory_bytes: float | None = Field(
        default=None,
        gt=0,
        description=(
            "total memory the CUDA driver reports (torch.cuda.mem_get_info), when known. HBM sizes are "
            "binary (an '80 GB' H100 has 80 GiB of HBM); GDDR6 data-centre cards lose 1/16 to ECC"
        ),
    )
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    dense_tflops: DenseTflops
    interconnect: Interconnect
    tdp_watts: float | None = Field(default=None, gt=0)
    power_reference: PowerReference | None = Field(
        default=None, description="same-die sibling at full power, for power-capped boards (PCIe, NVL)"
    )
    mig_profiles: tuple[MigProfile, ...] = ()
    aliases: tuple[str, ...] = ()
    notes: str = ""
    sources: dict[str, HttpUrl]

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> GpuSpec:
        required = ["memory_bytes", "memory_bandwidth_bytes_per_s", "dense_tflops", "interconnect"]
        if self.tdp_watts is not None:
            required.append("tdp_watts")
        if self.mig_profiles:
            required.append("mig_profiles")
        if self.power_reference is not None:
            required.append("power_reference")
            if self.tdp_watts is None:
                raise ValueError(f"GPU {self.id}: power_reference needs this GPU's own tdp_watts")
            self._check_power_reference(self.power_reference, self.tdp_watts)
        missing = [f for f in required if not any(k == f or k.startswith(f + ".") for k in self.sources)]
        if missing:
            raise ValueError(
                f"GPU {self.id}: no source URL for {', '.join(missing)} (add them under 'sources:')"
            )
        return self

    def _check_power_reference(self, ref: PowerReference, tdp_watts: float) -> None:
        """A same-die sibling at full power: at least this board's TDP and a 16-bit peak within
        ``MAX_SIBLING_PEAK_RATIO`` of its own (a unit slip, PFLOPS for TFLOPS, would otherwise cut the
        GEMM rate silently)."""
        own = self.sixteen_bit_tflops
        if ref.tdp_watts < tdp_watts:
            raise ValueError(
                f"GPU {self.id}: power_reference.tdp_watts {ref.tdp_watts:g} is below this GPU's own "
                f"{tdp_watts:g} W; name the full-power sibling (the SXM board)"
            )
        if not own / MAX_SIBLING_PEAK_RATIO <= ref.bf16_tflops <= own * MAX_SIBLING_PEAK_RATIO:
            raise ValueError(
                f"GPU {self.id}: power_reference.bf16_tflops {ref.bf16_tflops:g} is not within "
                f"{MAX_SIBLING_PEAK_RATIO:g}x of this "
                f"GPU's own {own:g} TFLOPS; give the sibling's dense 16-bit peak in TFLOPS"
            )

    def tflops(self, key: str) -> float | None:
        """Dense peak for a compute key (``bf16``, ``fp8`` …); ``None`` when the GPU has no such path."""
        value: float | None = getattr(self.dense_tflops, key, None)
        return value

    @property
    def sixteen_bit_tflops(self) -> float:
        """Dense 16-bit tensor peak, TFLOPS: BF16, or FP16 on parts without BF16 (T4, V100)."""
        return self.dense_tflops.bf16 or self.dense_tflops.fp16


class PriceEntry(FiniteModel):
    """One price observation: per GPU-hour for cloud kinds, per GPU for ``purchase``."""

    gpu: str
    kind: PriceKind
    provider: str
    usd: float = Field(gt=0)
    as_of: date
    source_url: HttpUrl
    region: str = ""
    notes: str = ""

"""Named efficiency factors of the training model, with provenance (``data/calibration/training_calibration.yaml``).

* ``mfu["family:dtype"]``: achieved fraction of the dense tensor peak of that dtype on the FLOPs
  a step executes (recompute included, so it equals MFU when nothing is recomputed), for large
  GEMMs. ``int4`` keys are QLoRA (bf16 GEMMs on a dequantised nf4 base). A family without its own
  key reads (``mfu_for``): for ``int4`` its ``bf16`` factor (the same GEMMs; the dequantisation is
  priced apart); else the calibrated families of that dtype carried over by machine balance, the
  geometric mean of ``mfu_k · (B_k / B)^BALANCE_EXPONENT`` where B is the GPU's dense peak over its
  HBM bandwidth (FLOP per byte) and ``B_k`` that of the GPUs ``mfu_k`` was fitted on
  (``balance_flop_per_byte``); else ``default:dtype``.
* ``balance_flop_per_byte["family:dtype"]``: the machine balance of the GPUs a family factor was
  fitted on (geometric mean over its rows), written by the fit beside each family factor.
* ``gemm_half_width``: hidden size at which GEMM efficiency is halved (small models under-fill the
  GPU): η_size = h / (h + h½).
* ``attention_efficiency``: FlashAttention's achieved fraction of peak relative to the GEMMs.
* ``dp_overlap`` / ``tp_overlap``: fraction of the compute time that can hide data-parallel
  (gradient / FSDP) and tensor-/context-/expert-parallel traffic.
* ``link_efficiency``: achieved fraction of link bandwidth in ring collectives.
* ``ib_bytes_per_s_per_gpu``: one-direction scale-out bandwidth per GPU (a topology input; 400 Gb/s
  NDR per GPU on DGX/HGX H100 = 50 GB/s).
* ``hop_latency_s[link]``: latency of one ring step.
* ``dequant_bandwidth_efficiency``: fraction of HBM bandwidth the nf4→bf16 dequantisation of a
  QLoRA base reaches (it re-reads and writes the base weights on every pass).
* ``power_limit_exponent``: the inference model's factor of the same name
  (``gpuplan.core.calibration.serving``): a power-capped board (PCIe, NVL) reaches
  ``roofline.power_limited_fraction ** exponent`` of its spec GEMM peak. No A/B training row runs on a
  capped board, so the value is copied from the inference fit rather than fitted here.
* ``expert_gemm_efficiency``: routed experts' grouped GEMMs relative to dense GEMMs of the same dtype
  when every expert gets many tokens (router, permutation and per-expert scheduling included).
* ``expert_tokens_half``: tokens per local expert per micro-batch at which that efficiency halves
  (small per-expert M under-fills the GPU: η = M_e/(M_e + M½)); ``gpuplan.core.training.moe``.
  A file without these two reads 1 and 0 (experts cost what dense GEMMs cost). The expert-parallel
  all-to-all is hidden like the other model-parallel traffic, by ``tp_overlap`` (a separate
  ``ep_overlap`` fitted to 0.39 against ``tp_overlap``'s 0.40 on the MoE rows, so it is not a factor).
* ``host_overhead_s``: host (CPU) time to issue one transformer layer's kernels for one pass
  (forward, activation backward, weight backward, recompute) in eager PyTorch: ~50 ops per block at
  5-25 µs of dispatch each. Kernels launch asynchronously, so it costs time only when it exceeds the
  GPU's own work (small models, short micro-batches); ``gpuplan.core.training.step``. A file without
  it reads 0 (no host floor).
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuplan.core.calibration.serving import FitProvenance
from gpuplan.core.errors import DataError, validate_data
from gpuplan.core.frozen import FrozenModel

DEFAULT_KEY = "default"
QLORA_KEY = "int4"
BALANCE_EXPONENT = 0.5
"""How the achieved fraction of peak falls with machine balance B (dense FLOP/s per HBM byte/s): a step
is GEMMs at the peak plus memory-bound work (norms, element-wise, attention I/O, optimizer) at the
bandwidth, so a GPU whose FLOPs outgrew its bandwidth reaches less of its peak. The two bf16 families
fitted on their own rows give ln(0.733/0.535)/ln(B_hopper/B_ampere) = 0.48 with the A100-80GB's
balance (312 TFLOP/s at 2.04 TB/s = 153 FLOP/B; H100 989 at 3.35 = 295) and 0.61 with the mean balance
of their rows (178, A100-40GB included); 0.5 is the rounded lower end."""


class TrainingCalibration(FrozenModel):
    """Efficiency factors of the training step model (see module docstring)."""

    mfu: dict[str, float]
    gemm_half_width: float = Field(gt=0, le=8192)
    attention_efficiency: float = Field(gt=0, le=1.5)
    dp_overlap: float = Field(ge=0, le=1)
    tp_overlap: float = Field(ge=0, le=1)
    link_efficiency: float = Field(gt=0, le=1)
    ib_bytes_per_s_per_gpu: float = Field(gt=0)
    hop_latency_s: dict[str, float]
    dequant_bandwidth_efficiency: float = Field(gt=0, le=1)
    power_limit_exponent: float = Field(default=0.0, ge=0, le=1)
    expert_gemm_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    expert_tokens_half: float = Field(default=0.0, ge=0, le=65536)
    host_overhead_s: float = Field(default=0.0, ge=0, le=0.1)
    balance_flop_per_byte: dict[str, float] = Field(default_factory=dict)
    provenance: FitProvenance

    def mfu_for(self, family: str, dtype: str, balance: float | None = None) -> float:
        """Fitted factor for ``family:dtype``; else (``int4``) the family's ``bf16`` one; else, given the
        GPU's ``balance`` (FLOP/byte), the calibrated families of ``dtype`` carried over by balance;
        else ``default:dtype``, else the global default (module docstring)."""
        own = [f"{family}:{dtype}"] + ([f"{family}:bf16"] if dtype == QLORA_KEY else [])
        for key in own:
            if key in self.mfu:
                return self.mfu[key]
        carried = [
            math.log(v) + BALANCE_EXPONENT * math.log(self.balance_flop_per_byte[k] / balance)
            for k, v in self.mfu.items()
            if balance and k.endswith(f":{dtype}") and k in self.balance_flop_per_byte
        ]
        if carried:
            return math.exp(sum(carried) / len(carried))
        return self.mfu.get(f"{DEFAULT_KEY}:{dtype}", self.mfu[DEFAULT_KEY])

    def hop_latency(self, link: str) -> float:
        return self.hop_latency_s.get(link, self.hop_latency_s[DEFAULT_KEY])

    def factor(self, field: str, key: str = "") -> float:
        """The value of one factor: ``mfu`` with key ``family:dtype`` (as ``mfu_for`` reads it), or a
        scalar field (``key`` '')."""
        if field == "mfu":
            family, dtype = key.split(":")
            return self.mfu_for(family, dtype)
        return float(getattr(self, field))


def parse_training_calibration(data: object, *, origin: str) -> TrainingCalibration:
    """Validate a calibration mapping; DataError names the file and the field."""
    cal = validate_data(TrainingCalibration, data, origin=origin)
    if DEFAULT_KEY not in cal.mfu or DEFAULT_KEY not in cal.hop_latency_s:
        raise DataError(f"{origin}: mfu and hop_latency_s need a '{DEFAULT_KEY}' entry")
    return cal

"""Named efficiency factors of the training model, with provenance (``data/calibration/training_calibration.yaml``).

* ``mfu["family:dtype"]``: achieved fraction of the dense tensor peak of that dtype on the FLOPs
  a step executes (recompute included, so it equals MFU when nothing is recomputed), for large
  GEMMs. ``int4`` keys are QLoRA (bf16 GEMMs on a dequantised nf4 base).
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
"""

from __future__ import annotations

from pydantic import Field

from gpuplan.core.calibration.serving import FitProvenance
from gpuplan.core.errors import DataError, validate_data
from gpuplan.core.frozen import FrozenModel

DEFAULT_KEY = "default"


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
    provenance: FitProvenance

    def mfu_for(self, family: str, dtype: str) -> float:
        """Fitted factor for ``family:dtype``, else ``default:dtype``, else the global default."""
        for key in (f"{family}:{dtype}", f"{DEFAULT_KEY}:{dtype}"):
            if key in self.mfu:
                return self.mfu[key]
        return self.mfu[DEFAULT_KEY]

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

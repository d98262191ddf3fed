"""Named efficiency factors that turn roofline peaks into achieved rates, with their provenance.

Physical meaning, so that a factor fitted on one GPU transfers to another of the same family:

* ``compute_efficiency[family]``: achieved fraction of the dense 16-bit tensor peak in large GEMMs
  (prefill, big decode batches). ``low_precision_compute_scale`` multiplies it for FP8/INT8/FP4,
  whose doubled peaks are harder to reach.
* ``bandwidth_efficiency[family]``: achieved fraction of HBM/GDDR bandwidth when streaming weights
  and KV cache (decode).
* ``engine_efficiency[engine]``: the engine's kernels and scheduler relative to TensorRT-LLM (1.0).
* ``step_overhead_s[engine]``: fixed host-side time per forward step (scheduling, sampling,
  launch), which dominates small models at batch 1.
* ``link_efficiency``: achieved fraction of the link bandwidth in ring all-reduce.
* ``hop_latency_s[link]``: latency of one ring step on that link kind (NVLink ~ µs; PCIe through
  the host bridge ~ 10 µs); an all-reduce over TP ranks takes 2(tp−1) steps.
* ``layer_overhead_s``: kernel-launch time per transformer layer of a prefill step (about ten
  kernels of a few µs each). Decode steps replay captured CUDA graphs (vLLM, TensorRT-LLM), so
  they pay only ``step_overhead_s``.
* ``overlap_loss``: the part of the shorter of weight streaming and GEMM math that the longer does
  not hide in a step (0 = pure roofline max, 1 = the two add up). It matters near the ridge point:
  mid-size decode batches and serving steps that mix decodes with prefill chunks. A calibration
  file without it reads as 0.
* ``expert_efficiency``: routed-expert work (streaming the touched experts and their GEMMs) relative
  to dense layers: grouped GEMMs over many small per-expert batches reach a lower share of the peak.
  A calibration file without it reads as 1 (experts cost what dense layers cost).
* ``power_limit_exponent``: how much of a power-capped board's linear power bound
  (``roofline.power_limited_fraction``: PCIe and NVL boards against their SXM sibling) shows up in
  its GEMM rate: achieved peak = spec peak x bound ** exponent. 1 = power scales with clock alone;
  about 1/3 = power ~ f·V² with the voltage following the clock. Memory-bound decode draws less
  power and is not capped. A calibration file without it reads as 0 (no cap).

The bundled values live in ``gpuplan/data/calibration/calibration.yaml``; ``gpuplan validate --fit-out``
refits them.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuplan.core.errors import DataError, validate_data
from gpuplan.core.frozen import FiniteModel

DEFAULT_FAMILY = "default"
MAX_FACTOR = 1.5
"""No efficiency can exceed the peak by much (1.5 leaves room for a datasheet that understates)."""
PER_KEY_FACTORS = (
    "compute_efficiency",
    "bandwidth_efficiency",
    "engine_efficiency",
    "step_overhead_s",
    "hop_latency_s",
)
"""The factors held per family, engine or link: each entry lies in (0, ``MAX_FACTOR``] and each map
has a ``default`` entry for the keys it lacks."""


class FitProvenance(FiniteModel):
    """How the factors were obtained, so a user can judge and repeat the fit."""

    method: str
    data: str
    rows: int = Field(ge=0)
    command: str
    fitted_on: str


class ReleaseFactors(FiniteModel):
    """What one release line changes (``core/perf/engine_releases.py``); 1, 1, 0 = exactly its engine's factors."""

    efficiency: float = Field(default=1.0, gt=0, le=1.5)
    mla_moe_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    mla_moe_layer_step_s: float = Field(default=0.0, ge=0, le=0.01)
    first_token_host_s: float = Field(default=0.0, ge=0, le=10.0)
    """Host time a request spends outside the engine's steps before its first token reaches the client
    (HTTP, tokenization, hand-off to the engine core, first detokenization); 0 for files that predate it."""
    mla_moe_first_token_host_s: float = Field(default=0.0, ge=0, le=10.0)
    """The same for MLA + MoE models only (the early-2025 DeepSeek stacks, whose lines are fitted on
    those models alone); 0 for files that predate it."""
    fitted_on: str = ""


class Calibration(FiniteModel):
    """The efficiency factors the performance model reads (see module docstring)."""

    compute_efficiency: dict[str, float]
    bandwidth_efficiency: dict[str, float]
    low_precision_compute_scale: float = Field(gt=0, le=1.5)
    engine_efficiency: dict[str, float]
    step_overhead_s: dict[str, float]
    link_efficiency: float = Field(gt=0, le=1)
    hop_latency_s: dict[str, float]
    layer_overhead_s: float = Field(ge=0, le=0.01)
    overlap_loss: float = Field(default=0.0, ge=0, le=1)
    """Weight-streaming / GEMM-math overlap loss κ (module docstring); 0 for files that predate it."""
    expert_efficiency: float = Field(default=1.0, gt=0, le=1)
    """Routed-expert work relative to dense GEMMs (module docstring); 1 for files that predate it."""
    power_limit_exponent: float = Field(default=0.0, ge=0, le=1)
    """How much of a power-capped board's power bound reaches its GEMM rate (module docstring); 0 for
    files that predate it."""
    release_lines: dict[str, ReleaseFactors] = Field(default_factory=dict)
    """Factors per engine release line (``core/perf/engine_releases.py``); a line without an entry
    runs at its engine's factors."""
    provenance: FitProvenance

    @model_validator(mode="after")
    def _positive_factors(self) -> Calibration:
        for name in PER_KEY_FACTORS:
            for key, value in getattr(self, name).items():
                if not 0 < value <= MAX_FACTOR:
                    raise ValueError(f"{name}.{key} = {value} is outside (0, {MAX_FACTOR}]")
        return self

    def compute(self, family: str) -> float:
        return self.compute_efficiency.get(family, self.compute_efficiency[DEFAULT_FAMILY])

    def bandwidth(self, family: str) -> float:
        return self.bandwidth_efficiency.get(family, self.bandwidth_efficiency[DEFAULT_FAMILY])

    def engine(self, name: str) -> float:
        return self.engine_efficiency.get(name, self.engine_efficiency[DEFAULT_FAMILY])

    def overhead(self, name: str) -> float:
        return self.step_overhead_s.get(name, self.step_overhead_s[DEFAULT_FAMILY])

    def is_fitted(self, family: str) -> bool:
        """Whether a family's factors come from measurements rather than the default prior."""
        return family in self.compute_efficiency and family in self.bandwidth_efficiency

    def release(self, line: str | None) -> ReleaseFactors:
        """A release line's factors (its engine's own, 1/1/0, when the line has none)."""
        return self.release_lines.get(line or "", _NO_RELEASE_FACTORS)

    def hop_latency(self, link: str) -> float:
        return self.hop_latency_s.get(link, self.hop_latency_s[DEFAULT_FAMILY])

    def factor(self, field: str, key: str = "") -> float:
        """The value of one factor (``key`` '' for a scalar field); a key the calibration lacks reads
        its field's ``default`` entry, as the model does."""
        value = getattr(self, field)
        if not key:
            return float(value)
        return float(value.get(key, value[DEFAULT_FAMILY]))


_NO_RELEASE_FACTORS = ReleaseFactors()


def parse_calibration(data: object, *, origin: str) -> Calibration:
    """Validate a calibration mapping; DataError names the file and the field."""
    cal = validate_data(Calibration, data, origin=origin)
    for name in PER_KEY_FACTORS:
        if DEFAULT_FAMILY not in getattr(cal, name):
            raise DataError(f"{origin}: {name} needs a '{DEFAULT_FAMILY}' entry")
    return cal

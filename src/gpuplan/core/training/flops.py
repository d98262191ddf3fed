"""FLOPs a training step executes and the model FLOPs it is credited with.

Model FLOPs per token, what MFU and model TFLOP/s are credited with: 6·N + 12·L·H·Q·T, the PaLM
convention (Chowdhery et al. 2022, App. B; Narayanan et al. 2021 eq. 3 without recompute). It counts
the full T × T attention matrix although causal kernels compute only half of it. That is the
definition sources publish TFLOP/s and MFU against (torchtitan's ``6·N + 12·l·h·q·t``), so ours
compare with theirs; the time model uses the executed (causal) FLOPs below.

Executed FLOPs add the recomputation (Korthikanti et al. 2022): full checkpointing re-runs the whole forward (8·N),
selective re-runs only the attention core. LoRA and QLoRA skip the weight-gradient GEMMs of the
frozen base (backward = activation gradients only: 2·N instead of 4·N) while attention still
costs forward + 2 × backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.spec import Checkpointing, Method


@dataclass(frozen=True)
class TokenFlops:
    """Per-token FLOPs, split into weight GEMMs and attention (QKᵀ, A·V)."""

    gemm: float
    attention: float

    @property
    def total(self) -> float:
        return self.gemm + self.attention


@lru_cache(maxsize=4096)
def forward_flops_per_token(model: ModelSpec, seq_len: int) -> TokenFlops:
    """Mean forward FLOPs per token of a causal ``seq_len`` sequence."""
    gemm = arith.matmul_flops_per_token(model)
    total = arith.prefill_flops(model, prompt_tokens=seq_len) / seq_len
    return TokenFlops(gemm=gemm, attention=max(total - gemm, 0.0))


FULL_ATTENTION_TO_CAUSAL = 2.0
"""The full attention matrix of the PaLM MFU convention is twice the causal half that is executed."""


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per trained token, 3 × (GEMMs + full attention): 6N + 12·L·H·Q·T (module docstring)."""
    fwd = forward_flops_per_token(model, seq_len)
    return 3.0 * (fwd.gemm + FULL_ATTENTION_TO_CAUSAL * fwd.attention)


def executed_flops_per_token(
    model: ModelSpec, seq_len: int, *, method: Method, checkpointing: Checkpointing
) -> TokenFlops:
    """FLOPs the GPUs execute per token, recompute included (module docstring)."""
    fwd = forward_flops_per_token(model, seq_len)
    gemm_passes = 2.0 if method in ("lora", "qlora") else 3.0
    attention_passes = 3.0
    if checkpointing == "full":
        gemm_passes += 1.0
        attention_passes += 1.0
    elif checkpointing == "selective":
        attention_passes += 1.0
    return TokenFlops(gemm=gemm_passes * fwd.gemm, attention=attention_passes * fwd.attention)

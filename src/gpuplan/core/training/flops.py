"""FLOPs a training step executes and the model FLOPs it is credited with.

Model FLOPs per token, what MFU and model TFLOP/s are credited with: 6·N + 12·L·H·Q·T, the PaLM
convention (Chowdhery et al. 2022, App. B; Narayanan et al. 2021 eq. 3 without recompute). It counts
the full T × T attention matrix although causal kernels compute only half of it. That is the
definition sources publish TFLOP/s and MFU against (torchtitan's ``6·N + 12·l·h·q·t``), so ours
compare with theirs; the time model uses the executed (causal) FLOPs below. LoRA and QLoRA are
credited the work their method needs, 4·N + 12·L·H·Q·T (no weight gradients of the frozen base; the
adapters' own FLOPs are under 1 % at rank 16 and left out), not the 6·N of a full update they do
not perform: crediting 6·N over a 4·N step would overstate their MFU by half.

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
_FULL_GEMM_PASSES = 3.0
"""Forward, activation gradients, weight gradients: 2N + 2N + 2N."""
_ADAPTER_GEMM_PASSES = 2.0
"""Forward and activation gradients only: the frozen base gets no weight gradients."""
_ADAPTER_METHODS = ("lora", "qlora")


MFU_CONVENTION = (
    "model FLOPs (PaLM: 6N + 12·L·H·Q·T per token, full attention matrix; LoRA/QLoRA 4N + 12·L·H·Q·T, "
    "no weight gradients of the frozen base; recomputation not credited) / dense datasheet peak of the "
    "GEMM dtype; HFU counts the FLOPs executed (causal attention, recomputation included) against the same "
    "peak, so it can read below MFU at long sequences without recomputation"
)
"""What ``mfu`` and ``hfu`` mean, as train-plan and train-fit print it (docs/training.md, docs/json.md)."""


def model_flops_per_token(model: ModelSpec, seq_len: int, *, method: Method = "pretrain") -> float:
    """Model FLOPs per trained token: GEMM passes × forward GEMMs + 3 × full attention, i.e.
    6N + 12·L·H·Q·T for pretraining and full fine-tuning, 4N + 12·L·H·Q·T for LoRA/QLoRA (module
    docstring)."""
    fwd = forward_flops_per_token(model, seq_len)
    gemm_passes = _ADAPTER_GEMM_PASSES if method in _ADAPTER_METHODS else _FULL_GEMM_PASSES
    return gemm_passes * fwd.gemm + 3.0 * FULL_ATTENTION_TO_CAUSAL * fwd.attention


def executed_flops_per_token(
    model: ModelSpec, seq_len: int, *, method: Method, checkpointing: Checkpointing
) -> TokenFlops:
    """FLOPs the GPUs execute per token, recompute included (module docstring)."""
    fwd = forward_flops_per_token(model, seq_len)
    gemm_passes = _ADAPTER_GEMM_PASSES if method in _ADAPTER_METHODS else _FULL_GEMM_PASSES
    attention_passes = 3.0
    if checkpointing == "full":
        gemm_passes += 1.0
        attention_passes += 1.0
    elif checkpointing == "selective":
        attention_passes += 1.0
    return TokenFlops(gemm=gemm_passes * fwd.gemm, attention=attention_passes * fwd.attention)

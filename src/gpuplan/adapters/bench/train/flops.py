"""The FLOPs ``gpuplan bench train`` credits one trained token with (its ``achieved_tflops``), kept apart
from the runner so that reading a stored result back (``gpuplan calibrate``) needs no torch.

Credited FLOPs per token: gpuplan's ``training_flops_per_token`` (6N + causal attention), × 2/3 for
LoRA (no weight gradients for the frozen base). ``achieved_tflops = credited × tokens / step_s``, so
``step_s = credited × tokens / achieved_tflops`` recovers the measured step time exactly.
"""

from __future__ import annotations

from gpuplan.core.model.arith import training_flops_per_token
from gpuplan.core.model.spec import ModelSpec

LORA_FLOPS_SHARE = 2.0 / 3.0
"""LoRA's backward computes activation gradients only: 4N of the 6N (forward 2N + backward 2N)."""


def credited_flops_per_token(model: ModelSpec, *, seq_len: int, method: str) -> float:
    """FLOPs per token behind a bench train row's ``achieved_tflops`` (module docstring)."""
    share = LORA_FLOPS_SHARE if method == "lora" else 1.0
    return training_flops_per_token(model, seq_len=seq_len) * share

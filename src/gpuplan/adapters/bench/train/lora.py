"""A minimal LoRA (Hu et al. 2021) for timing: frozen base, trainable rank-r A·B on the projections.

Enough to time the step of a LoRA fine-tune (no peft dependency): the base weights get no
gradients and no optimizer state; each adapted linear adds ``x·Aᵀ·Bᵀ·(alpha/r)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gpuplan.adapters.bench.train.config import LORA_TARGETS


class LoraLinear(nn.Module):
    """``base(x) + scale · B(A(x))`` with ``base`` frozen; B starts at zero as in the paper."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        device, dtype = base.weight.device, base.weight.dtype
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, device=device, dtype=dtype))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, device=device, dtype=dtype))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale
        return out


def apply_lora(model: nn.Module, rank: int) -> int:
    """Freeze ``model`` and adapt every target projection in place; returns the trainable count."""
    for p in model.parameters():
        p.requires_grad_(False)
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in LORA_TARGETS
    ]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoraLinear(module, rank, alpha=2.0 * rank))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

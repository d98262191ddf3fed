"""Memoised step times of the core step model (``perf/roofline.py``) for the simulator's replicas."""

from __future__ import annotations

from gpuplan.core.perf.roofline import StepModel


class StepTimes:
    """Memoised step times of the core model; keys are integers, so hits reproduce exact values."""

    def __init__(self, step: StepModel) -> None:
        self.step = step
        self._decode: dict[tuple[int, int], float] = {}
        self._prefill: dict[tuple[int, int, int], float] = {}
        self._mixed: dict[tuple[int, int, int, int, int], float] = {}

    def decode_s(self, batch: int, context: int) -> float:
        key = (batch, context)
        value = self._decode.get(key)
        if value is None:
            value = self._decode[key] = self.step.decode_s(batch=batch, context=context)
        return value

    def prefill_s(self, tokens: int, prompt: int, cached: int = 0) -> float:
        """A prefill step of ``tokens`` from prompts of ``prompt`` tokens, ``cached`` of each from the
        prefix cache."""
        key = (tokens, prompt, cached)
        value = self._prefill.get(key)
        if value is None:
            value = self._prefill[key] = self.step.prefill_s(
                tokens=tokens, prompt_tokens=prompt, cached_tokens=cached
            )
        return value

    def mixed_s(self, batch: int, context: int, tokens: int, prompt: int, cached: int = 0) -> float:
        """A step of decode tokens and a prefill chunk together: one pass over the weights."""
        key = (batch, context, tokens, prompt, cached)
        value = self._mixed.get(key)
        if value is None:
            value = self._mixed[key] = self.step.step_s(
                batch=batch,
                context=context,
                prefill_tokens=tokens,
                prompt_tokens=prompt,
                cached_tokens=cached,
            )
        return value

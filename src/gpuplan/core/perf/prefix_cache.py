"""Prefix caching (a workload property): the share ``h`` of each prompt an engine finds in its cache.

vLLM's automatic prefix caching and SGLang's RadixAttention keep the KV of earlier prompts' blocks and
reuse it when a new prompt starts with the same tokens (a system prompt, a conversation's history, a
document asked about again). A prompt of ``p`` tokens with hit rate ``h`` then computes only its last

    computed = max(⌈(1 − h) · p⌉, 1)

tokens (the last one is always computed: its logits give the first output token), as the simulator
has done since it had prefix caching (``core/sim/replica.py``). Those tokens still attend over the
whole prompt: their attention is Σ attention(i) for i = cached + 1 .. p, more than (1 − h) of the
prompt's (``StepModel.prefill_s(cached_tokens=...)``). TTFT and the prefill share of the GPU drop
accordingly; decode is unchanged.

KV memory is counted for the whole prompt of every request, as without caching: conservative, since
requests that share a prefix share its blocks (gpuplan does not know how many share one).
"""

from __future__ import annotations

import math

from gpuplan.core.workload import Workload


def computed_prompt_tokens(w: Workload) -> int:
    """Prompt tokens a request's prefill computes: all of them, or the uncached share (at least one)."""
    if w.prefix_cache_hit_rate <= 0.0 or w.input_tokens <= 0:
        return w.input_tokens
    return max(math.ceil(w.input_tokens * (1.0 - w.prefix_cache_hit_rate)), 1)


def cached_prompt_tokens(w: Workload) -> int:
    """Prompt tokens a request finds in the prefix cache."""
    return w.input_tokens - computed_prompt_tokens(w)

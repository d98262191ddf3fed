"""Synthetic prompts and the token-count approximation used when no tokenizer is at hand.

Approximation (documented in docs/bench.md): **one whitespace-separated word is one token**. The
synthetic prompts are built from short, common lower-case English words that are a single token in
the GPT-2/cl100k/Llama/Qwen BPE vocabularies when preceded by a space, so for them the count is
exact up to the tokenizer's BOS and chat-template tokens (typically +1 to +10). For arbitrary text
it is an underestimate of roughly 25 % (English averages ≈ 1.3 tokens per word).
"""

from __future__ import annotations

import random

_WORD_TEXT = (
    "the of and to in is was for on are with as at be by this had not but from or have an they which "
    "one you were her all she there would their we him been has when who will more no if out so said "
    "what up its about into than them can only other new some could time these two may then do first "
    "any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just those people how too little "
    "state good very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since against go came "
    "right used take three"
)
WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())


def estimate_tokens(text: str) -> int:
    """Token count of ``text`` under the one-word-one-token approximation."""
    return len(text.split())


_BY_BYTE: tuple[str, ...] = tuple(WORDS[i % len(WORDS)] for i in range(256))
"""Word of each byte value (the first 116 words twice as likely: harmless for load, and ~10× faster than
``random.choices``, which matters at 1,000 prompts/s)."""


def synthetic_prompt(tokens: int, seed: int) -> str:
    """A prompt of ``tokens`` words, different for every ``seed`` (defeats prefix caching)."""
    return " ".join(map(_BY_BYTE.__getitem__, random.Random(seed).randbytes(tokens)))

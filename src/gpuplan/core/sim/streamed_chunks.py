"""Inter-token gaps as a streaming client counts them when some tokens arrive with no text.

A streaming server detokenizes each new token and sends the text it adds. When a token adds no
text the server has nothing to send yet (a detokenizer that holds back a token which only adds
whitespace or half of a multi-byte character until the next one), and a client that counts one gap
per non-empty chunk sees that token's gap and the next token's as one gap. ``held_share`` is the
share of tokens held back, independently of each other. The stream is cut into gaps as:

* a gap preceded by no held token stays one step gap: weight ``(1 − h)²``;
* a gap preceded by a held token spans two consecutive step gaps of the sequence: weight
  ``h·(1 − h)``. Runs of two or more held tokens (probability ``h²`` per gap) are counted as pairs,
  an approximation: the gaps' mean is ``(1 + h)`` step gaps where the exact cut gives ``1 / (1 − h)``
  (at h = 5.5 %, 1.055 against 1.058).

The visible gaps weigh ``1 − h`` of the tokens: a P99 over them reads the pair gaps as soon as
``h·(1 − h) / (1 − h) = h`` exceeds 1 % of the gaps.
"""

from __future__ import annotations

import numpy as np

from gpuplan.core.sim.workload import FloatArray


def chunk_gaps(gap_s: FloatArray, gap_n: FloatArray, held_share: float) -> tuple[FloatArray, FloatArray]:
    """(gap seconds, weights) a client sees from one replica's step gaps ``gap_s`` (in step order,
    ``gap_n`` sequences each) when ``held_share`` of the tokens arrive with no text (module docstring).
    A pair joins a step's gap with the replica's last earlier step that recorded gaps (``gap_n`` > 0:
    steps without a decoding sequence, such as whole-prompt prefills, record none): the previous gap
    of a sequence that decoded in both. A step with no such earlier step keeps its held tokens single."""
    if not 0.0 <= held_share < 1.0:
        raise ValueError(f"held_share must be in [0, 1), got {held_share}")
    if held_share == 0.0 or gap_s.size == 0:
        return gap_s, gap_n
    kept = 1.0 - held_share
    index = np.arange(gap_s.size)
    recorded = np.maximum.accumulate(np.where(gap_n > 0, index, -1))
    previous = np.concatenate([[-1], recorded[:-1]])  # the last recording step before each step
    paired = previous >= 0
    pairs_s = gap_s[paired] + gap_s[previous[paired]]
    pairs_n = gap_n[paired] * held_share * kept
    singles_n = gap_n * kept * kept + np.where(paired, 0.0, gap_n * held_share * kept)
    return np.concatenate([gap_s, pairs_s]), np.concatenate([singles_n, pairs_n])

"""Inter-token gaps as a client counts them when some tokens stream with no text."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan.core.sim.metrics import distribution
from gpuplan.core.sim.streamed_chunks import chunk_gaps

STEP_S = 0.05
STEPS = 1_000
SEQS = 8


def _steady() -> tuple[np.ndarray, np.ndarray]:
    """A replica decoding ``SEQS`` sequences in equal steps of ``STEP_S``."""
    return np.full(STEPS, STEP_S), np.full(STEPS, float(SEQS))


def test_no_held_tokens_leave_the_step_gaps() -> None:
    gap_s, gap_n = _steady()
    values, weights = chunk_gaps(gap_s, gap_n, 0.0)
    assert values is gap_s and weights is gap_n


def test_held_tokens_weigh_one_minus_h_of_the_gaps_and_pairs_h_of_them() -> None:
    """Visible gaps: (1 - h)^2 single + h(1 - h) pairs = (1 - h) per token; pairs are h of them."""
    h = 0.05
    values, weights = chunk_gaps(*_steady(), h)
    assert weights.sum() == pytest.approx(STEPS * SEQS * (1 - h))
    pairs = weights[values > 1.5 * STEP_S].sum()
    assert pairs / weights.sum() == pytest.approx(h, rel=0.01)
    assert values.max() == pytest.approx(2 * STEP_S)


def test_p99_reads_two_steps_once_more_than_one_percent_are_held() -> None:
    held = distribution(*chunk_gaps(*_steady(), 0.05))
    assert held.p50_ms == pytest.approx(STEP_S * 1000)
    assert held.p99_ms == pytest.approx(2 * STEP_S * 1000)
    rare = distribution(*chunk_gaps(*_steady(), 0.005))  # 0.5 % pairs: the P99 stays one step
    assert rare.p99_ms == pytest.approx(STEP_S * 1000)


def test_a_pair_joins_consecutive_step_gaps() -> None:
    values, weights = chunk_gaps(np.array([0.1, 0.2, 0.4]), np.array([1.0, 1.0, 1.0]), 0.5)
    assert values[3:].tolist() == pytest.approx([0.1 + 0.2, 0.2 + 0.4])
    assert weights[3:].tolist() == pytest.approx([0.25, 0.25])
    assert weights[0] == pytest.approx(0.25 + 0.25)  # the first step has no earlier gap to join


def test_a_pair_skips_steps_that_recorded_no_gap() -> None:
    # the middle step decoded nothing (a whole-prompt prefill): the last step's held tokens join the
    # first step's gap, 0.05 + 0.30, not the empty step's 0
    values, weights = chunk_gaps(np.array([0.05, 0.0, 0.30]), np.array([8.0, 0.0, 8.0]), 0.5)
    pairs = values[3:][weights[3:] > 0]
    assert pairs.tolist() == pytest.approx([0.35])
    assert weights.sum() == pytest.approx(16 * 0.5)


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_a_share_outside_0_1_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="held_share"):
        chunk_gaps(*_steady(), share)

"""The two searches the tail model (``tail_model.py``) runs, as plain numerics on callables.

* ``smallest_fixed_point``: the decode batch n = g(n) of an increasing g, the root that plain iteration
  from below climbs to, found in a few evaluations instead of tens (the loop gain g′ runs to 0.9 near a
  replica's capacity, where plain iteration moves the error down by only 10 % a step).
* ``highest_passing``: the highest passing point of a monotone pass/fail on a grid, the point bisection
  finds, in fewer evaluations (a secant on the log of a continuous P99-over-limit ratio picks the
  split; 10-11 tail-model estimates a plan against 13-14).

Both are exact stand-ins for the slow forms (tests/unit/core/sim/test_tail_solve.py checks them against
plain iteration and bisection).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

FixedPoint = tuple[Literal["ok", "infinite", "ceiling"], float]
"""``ok`` and the root; or the climb ran into an infinite g (``infinite``) or to the ceiling, and the
last point below the root it reached."""

OVERSHOOT = 0.5
"""How far past the extrapolated root (as a share of the distance to it) the bracket's upper end is
placed: far enough to be past the root when the extrapolation is off by half, and well below the second
root of a convex g (the unstable one, where TPOT runs away)."""


def smallest_fixed_point(
    g: Callable[[float], float],
    *,
    start: float,
    ceiling: float,
    tolerance: float,
    max_evals: int,
    above: float | None = None,
) -> FixedPoint:
    """The smallest n ≥ ``start`` with g(n) = n, for an increasing g with g(start) ≥ start: the root
    plain iteration n ↦ g(n) climbs to from ``start``, to ``tolerance``·max(n, 1).

    When g is under the diagonal at ``above`` (a point known to lie past that root, e.g. the root of a
    g that is higher everywhere) or else at ``ceiling``, [start, that point] holds exactly one root (g
    crosses the diagonal downwards once; a second, upward crossing — the unstable root where TPOT runs
    away — would leave g above it at the ceiling), and regula falsi (Illinois) closes on it. Otherwise
    the climb is plain iteration, whose iterates stay below the root (g is increasing), with every two
    of them extrapolated (Aitken) past the root to try a bracket; ``infinite`` or ``ceiling`` when an
    iterate's g is infinite or reaches the ceiling, or the extrapolated root lies past it."""
    g_start = g(start)
    if not math.isfinite(g_start) or g_start >= ceiling:
        return ("ceiling" if math.isfinite(g_start) else "infinite"), start
    if abs(g_start - start) <= tolerance * max(start, 1.0):
        return "ok", start
    evals = 1
    for top in (above, ceiling):
        if top is None or top <= start or top > ceiling:
            continue
        g_top = g(top)
        evals += 1
        if g_top < top:
            return "ok", _illinois(g, start, g_start, top, g_top, tolerance, max_evals - evals)
    return _climb(g, start, g_start, ceiling, tolerance, max_evals - evals)


def _climb(
    g: Callable[[float], float], low: float, g_low: float, ceiling: float, tolerance: float, budget: int
) -> FixedPoint:
    """Plain iteration from ``low`` with Aitken brackets (``smallest_fixed_point``)."""
    prev: float | None = None
    while budget > 0:
        if not math.isfinite(g_low) or g_low >= ceiling:
            return ("ceiling" if math.isfinite(g_low) else "infinite"), low
        if abs(g_low - low) <= tolerance * max(low, 1.0):
            return "ok", low
        upper = _past_root(prev, low, g_low)
        if upper is not None and upper >= ceiling * (1.0 + OVERSHOOT):
            return "ceiling", low
        if upper is not None and upper < ceiling:
            g_up = g(upper)
            budget -= 1
            if g_up <= upper:
                return "ok", _illinois(g, low, g_low, upper, g_up, tolerance, budget)
        prev, low, g_low = low, g_low, g(g_low)
        budget -= 1
    return "ok", low


def _past_root(prev: float | None, low: float, g_low: float) -> float | None:
    """A point past the root extrapolated (Aitken) from plain iterates prev → low → g(low); None when
    they do not contract (ρ outside (0, 1))."""
    if prev is None or low <= prev:
        return None
    ratio = (g_low - low) / (low - prev)
    if not 0.0 < ratio < 1.0:
        return None
    return g_low + (g_low - low) * ratio / (1.0 - ratio) * (1.0 + OVERSHOOT)


def _illinois(
    g: Callable[[float], float], a: float, g_a: float, b: float, g_b: float, tolerance: float, budget: int
) -> float:
    """The root of g(n) − n in [a, b] (above the diagonal at a, at or under it at b): regula falsi,
    halving a kept end's excess when the same end is kept twice (Illinois), to a bracket of
    ``tolerance``·max(a, 1); returns its lower end."""
    h_a, h_b, kept = g_a - a, g_b - b, 0
    for _ in range(budget):
        if b - a <= tolerance * max(a, 1.0) or h_b == 0.0:
            break
        x = a + h_a * (b - a) / (h_a - h_b)
        h_x = g(x) - x
        if h_x > 0.0:
            a, h_a = x, h_x
            h_b, kept = (h_b / 2.0 if kept < 0 else h_b), -1
        else:
            b, h_b = x, (h_x if math.isfinite(h_x) else -h_a)
            h_a, kept = (h_a / 2.0 if kept > 0 else h_a), 1
    return b if h_b == 0.0 else a


def highest_passing(
    test: Callable[[int], tuple[bool, float]],
    *,
    grid: int,
    excess_at_zero: float,
    enough: Callable[[int, int], bool] | None = None,
) -> int:
    """The highest j in [0, ``grid``) that passes, for a pass/fail that holds at 0, fails at ``grid``
    and flips once: the point bisection of [0, grid] finds in log2(grid) halvings. ``test(j)`` gives
    pass/fail and an excess over the limit, ratio − 1 (≤ 0 on passing points, inf where it has no
    finite value); the split is the secant root of log(ratio) through the last two points when both are
    finite and it falls inside the bracket, else the midpoint, and a midpoint follows any two splits
    that did not halve the bracket between them, so it never takes more than about twice bisection's
    count. ``enough(lo, hi)`` (the
    highest point passed, the lowest failed) may end the search early: the answer is then ``lo``, a
    passing point at or below the one bisection finds."""
    lo, hi = 0, grid
    last, prev = (0, excess_at_zero), (grid, math.inf)
    widths = [grid, grid]
    while hi - lo > 1 and not (enough is not None and enough(lo, hi)):
        width = hi - lo
        j = _secant(prev, last, lo, hi) if 2 * width <= widths[-2] else (lo + hi) // 2
        passed, excess = test(j)
        lo, hi = (j, hi) if passed else (lo, j)
        prev, last = last, (j, excess)
        widths.append(width)
    return lo


def _secant(a: tuple[int, float], b: tuple[int, float], lo: int, hi: int) -> int:
    """The grid point strictly inside (lo, hi) nearest the root of the secant of log(1 + excess)
    through ``a`` and ``b`` (point, excess); the midpoint when they give none (an infinite excess, a
    flat line, a root outside)."""
    xa, fa = a[0], _log_ratio(a[1])
    xb, fb = b[0], _log_ratio(b[1])
    if math.isfinite(fa) and math.isfinite(fb) and fa != fb:
        x = xb - fb * (xb - xa) / (fb - fa)
        if lo < x < hi:
            return min(max(round(x), lo + 1), hi - 1)
    return (lo + hi) // 2


def _log_ratio(excess: float) -> float:
    """log(1 + excess): the log of the P99-over-limit ratio, nearer a straight line in the rate than the
    ratio itself where latency runs up steeply; −inf at a zero ratio, inf past the stability limits."""
    return math.log(1.0 + excess) if excess > -1.0 else -math.inf

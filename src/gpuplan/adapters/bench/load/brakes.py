"""What keeps a failing server from a storm of requests: backoff after errors, ``Retry-After``, and the
``--max-errors`` stop.

- **Closed loop**: a worker whose request failed waits before its next one: 50 ms after the first
  failure in a row, doubling to at most 5 s (exponential backoff with a cap, as the OpenAI rate-limit
  guide advises), or the server's ``Retry-After`` when it asks for longer; a success resets it.
- **Open loop**: the schedule is the experiment, so errors do not slow it; a ``Retry-After`` holds every
  send until it has passed (held requests go out then, late, and their lateness is recorded), and
  ``--max-errors`` stops it.
- **--max-errors**: a count (``50``), or a share (``5%``) of the requests finished so far, judged once
  :data:`MIN_FINISHED_FOR_SHARE` have finished. When reached, nothing more is sent; requests in flight
  finish and are stored like every other. With worker processes each worker stops at its part of a
  count (rounded up) or at the share of its own requests.
"""

from __future__ import annotations

import math

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.store.records import RequestRecord

BACKOFF_START_S = 0.05
BACKOFF_MAX_S = 5.0
"""Closed-loop backoff after consecutive failures: 50 ms doubling to 5 s. Exponential backoff with a cap
is what https://platform.openai.com/docs/guides/rate-limits ("Retrying with exponential backoff")
recommends; 50 ms is about one decode step's worth of a busy server, 5 s bounds the wait of a closed
loop that must still finish in its duration."""
MIN_FINISHED_FOR_SHARE = 20
"""A share of errors is judged once this many requests have finished: one early failure is not 100 %."""


def pause_s(*, consecutive_failures: int, retry_after_s: float | None) -> float:
    """How long a closed-loop worker waits before its next request."""
    if consecutive_failures <= 0:
        return retry_after_s or 0.0
    backoff = min(BACKOFF_START_S * 2.0 ** (consecutive_failures - 1), BACKOFF_MAX_S)
    return max(backoff, retry_after_s or 0.0)


class Brakes:
    """Counts one process's finished and failed requests; ``stopped`` once ``--max-errors`` is reached."""

    def __init__(self, config: LoadConfig, parts: int = 1) -> None:
        self.max_errors = math.ceil(config.max_errors / parts) if config.max_errors is not None else None
        self.share = config.max_error_share
        self.finished = 0
        self.failed = 0
        self.stopped = False

    def note(self, record: RequestRecord) -> None:
        self.finished += 1
        if record.error is None:
            return
        self.failed += 1
        over_count = self.max_errors is not None and self.failed >= self.max_errors
        over_share = (
            self.share is not None
            and self.finished >= MIN_FINISHED_FOR_SHARE
            and self.failed >= self.share * self.finished
        )
        self.stopped = self.stopped or over_count or over_share


def limit_text(config: LoadConfig) -> str:
    """``--max-errors`` as the user wrote it: ``50`` or ``5%``."""
    if config.max_errors is not None:
        return str(config.max_errors)
    return f"{(config.max_error_share or 0.0) * 100:g}%"

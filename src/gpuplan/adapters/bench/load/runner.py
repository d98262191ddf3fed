"""Run a load test: the whole schedule in this process, or sharded over ``workers`` processes.

The loops themselves are in :mod:`gpuplan.adapters.bench.load.loops`, the worker processes in
:mod:`gpuplan.adapters.bench.load.shard`; both return the same :class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.loops import Outcome, Sink, drive, first_origin, new_loop
from gpuplan.adapters.bench.load.shard import run_sharded
from gpuplan.adapters.bench.load.workload import build

__all__ = ["Outcome", "Sink", "run"]


def run(config: LoadConfig, sink: Sink, skip: Collection[int] = ()) -> Outcome:
    """Run the load; ``sink`` gets every record as it completes; indices in ``skip`` are not sent."""
    plan = build(config)
    if config.workers > 1:
        return run_sharded(config, plan, sink, set(skip))
    cpu = time.process_time()
    with asyncio.Runner(loop_factory=new_loop) as runner:
        outcome = runner.run(drive(config, plan, sink, set(skip), (0, 1), first_origin(config, plan, skip)))
    outcome.cpu_s = time.process_time() - cpu
    return outcome

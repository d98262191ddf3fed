"""``gpuplan bench serve``: the async streaming load tester (docs/bench.md; entry:
:func:`gpuplan.usecases.bench_serve.serve`)."""

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.adapters.store.records import RequestRecord

__all__ = ["BenchSummary", "LoadConfig", "RequestRecord"]

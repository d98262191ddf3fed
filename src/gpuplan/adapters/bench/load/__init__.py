"""``gpuplan bench serve``: the async streaming load tester (see docs/bench.md; entry: ``service.serve``)."""

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.adapters.store.records import RequestRecord

__all__ = ["BenchSummary", "LoadConfig", "RequestRecord"]

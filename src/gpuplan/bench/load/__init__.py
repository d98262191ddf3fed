"""``gpuplan bench serve``: the async streaming load tester (see docs/bench.md; entry: ``service.serve``)."""

from gpuplan.bench.load.config import LoadConfig
from gpuplan.bench.load.record import RequestRecord
from gpuplan.bench.load.summary import BenchSummary

__all__ = ["BenchSummary", "LoadConfig", "RequestRecord"]

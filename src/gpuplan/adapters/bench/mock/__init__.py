"""A mock OpenAI-compatible streaming server with a set TTFT / ITL and fault modes, for tests and demos."""

from gpuplan.adapters.bench.mock.config import MockConfig
from gpuplan.adapters.bench.mock.server import MockServer, run, serve_forever

__all__ = ["MockConfig", "MockServer", "run", "serve_forever"]

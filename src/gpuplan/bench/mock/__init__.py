"""A mock OpenAI-compatible streaming server with a set TTFT / ITL and fault modes, for tests and demos."""

from gpuplan.bench.mock.config import MockConfig
from gpuplan.bench.mock.server import MockServer, run, serve_forever

__all__ = ["MockConfig", "MockServer", "run", "serve_forever"]

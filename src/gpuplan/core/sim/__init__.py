"""Discrete-event serving simulator (core layer: pure, numpy only): continuous batching over a paged
KV cache, preemption, chunked prefill, prefix caching, routers, prefill/decode disaggregation, and a
capacity search under P99 SLOs. See docs/simulator.md.

Import from the submodules (``simulator``, ``config``, ``metrics``, ``capacity``, ...): this package
exports nothing.
"""

__all__: list[str] = []

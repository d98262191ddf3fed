"""Serving performance of one deployment: memory per GPU (``memory``), step times (``roofline``),
steady state per scenario kind (``scenarios``, ``closed_loop``), whole-deployment predictions
(``inference``), layouts (``layout``), workloads (``workload``) and engine defaults
(``engine_profiles``).

Import from the submodules: this package exports nothing.
"""

__all__: list[str] = []

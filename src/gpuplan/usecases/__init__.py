"""Use cases: one module per user question (fit, predict, recommend, simulate, train, fleet, deploy,
validate, calibrate, bench serve). Each resolves ids at the edge and makes one core call.

Import from the submodules: this package exports nothing.
"""

__all__: list[str] = []

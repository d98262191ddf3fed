"""The model description the core computes on (``spec``) and its parameter, FLOP and KV arithmetic
(``arith``).

Import from the submodules: this package exports nothing (``gpuplan.adapters.models`` gathers both
with the model registry).
"""

__all__: list[str] = []

"""Training and fine-tuning planner: memory per GPU, step time, time/cost/energy, layout search.

Pure core (no I/O: the calibration comes in as an argument); the use case that resolves model ids
and the catalog is :mod:`gpuplan.usecases.train`.

Import from the submodules (``plan``, ``spec``, ``search``, ...): this package exports nothing.
"""

__all__: list[str] = []

"""Training and fine-tuning planner: memory per GPU, step time, time/cost/energy, layout search.

Pure core (no I/O except reading the bundled calibration through importlib.resources); the
adapter that resolves model ids and the catalog is :mod:`gpuplan.usecases.train`.
"""

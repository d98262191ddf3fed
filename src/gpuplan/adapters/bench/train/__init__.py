"""Training-step benchmark (``gpuplan bench train``): a model built from its config with random
weights (transformers, no download), forward + backward + optimizer timed per batch size.
torch and transformers are imported lazily (extra ``gpuplan[train]``)."""

from gpuplan.adapters.bench.train.config import TrainBenchConfig, TrainResult

__all__ = ["TrainBenchConfig", "TrainResult"]

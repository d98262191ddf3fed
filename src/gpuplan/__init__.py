"""gpuplan: which GPU, how many, at what cost, for this model and this workload."""

__version__ = "0.1.0"
__all__ = ["__version__"]

"""``gpuplan calibrate``: fit the model's named efficiency factors to your own measurements.

Micro-benchmarks (``bench gpu``) give each GPU family's achieved GEMM and memory-bandwidth share
directly; serving runs (``bench serve``) fit the engine's efficiency and overheads through the same
predict path as ``gpuplan validate``; training runs (``bench train``) give MFU. The result is a
calibration profile (YAML, with provenance) that ``--calibration PROFILE`` loads.

Import from the submodules (``profile``, ``rows``, ``fit``, ``service``): this package imports
nothing itself, so that loading a profile does not pull in the results store (SQLAlchemy).
"""

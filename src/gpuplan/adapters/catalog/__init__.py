"""The GPU catalog: typed specs and prices (schema), bundled data, and the single loader.

Import from here: ``from gpuplan.adapters.catalog import default_catalog, load_catalog, Catalog``.
Importing does no I/O; the first :func:`default_catalog` call reads the bundled files.
"""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import (
    CONFIG_DIR_ENV,
    Catalog,
    default_catalog,
    default_config_dir,
    load_catalog,
    normalize_name,
    representative_price,
)
from gpuplan.core.hardware import DenseTflops, GpuSpec, Interconnect, MigProfile, PriceEntry

__all__ = [
    "CONFIG_DIR_ENV",
    "Catalog",
    "DenseTflops",
    "GpuSpec",
    "Interconnect",
    "MigProfile",
    "PriceEntry",
    "default_catalog",
    "default_config_dir",
    "load_catalog",
    "normalize_name",
    "representative_price",
]

"""The GPU catalog: the single loader of the bundled files (``gpuplan/data/catalog``), the user's config
dir and ``--catalog`` files, and the typed specs and prices it returns (``gpuplan.core.hardware``).

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

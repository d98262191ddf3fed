"""The GPU catalog adapter: the single loader of bundled and user catalog files (``loader``), their
parsing (``_parse``) and the GPU a driver product name or node label means (``product_names``).

The records are core types (:mod:`gpuplan.core.hardware`); the bundled files are data
(``src/gpuplan/data/catalog/``). Import from the submodules: ``from gpuplan.adapters.catalog.loader
import Catalog, default_catalog, load_catalog``. This package exports nothing.
"""

__all__: list[str] = []

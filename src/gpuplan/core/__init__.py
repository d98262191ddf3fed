"""The pure core: units, dtypes, hardware and model arithmetic, memory, performance, simulation, search,
training and fleet maths. No I/O; imports nothing above it (see docs/architecture.md).

Import from the submodules (``units``, ``dtypes``, ``errors``, ...) and subpackages: this package
exports nothing.
"""

__all__: list[str] = []

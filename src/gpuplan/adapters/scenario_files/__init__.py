"""Scenario YAML documents: one document, one validated object (deployment, simulation, training).

Import from the submodules (``deployment``, ``simulate``, ``training``): this package exports nothing.
"""

__all__: list[str] = []

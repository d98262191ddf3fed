"""Named efficiency factors of the serving and training models, with their provenance (pure types).

Import from the submodules (``serving``, ``training``, ``solver``): this package exports nothing.
"""

__all__: list[str] = []

"""Plotly figures of answers already computed (serving and training); they draw, they do not predict.

Import from the submodules (``serving``, ``training``): this package exports nothing, so that
importing it does not need plotly.
"""

__all__: list[str] = []

"""Measurement adapters: the mock OpenAI-compatible server (``mock``) and the serving load tester (``load``).

Adapters layer: may import the core, the core never imports them. Results go to ``gpuplan.adapters.store``.

Import from the subpackages (``mock``, ``load``, ``gpu``, ``train``) or from ``tokens``: this package
exports nothing.
"""

__all__: list[str] = []

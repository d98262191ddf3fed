"""Adapters to the outside: catalog files, model registry and Hub, scenario files, results store, load and
GPU benchmarks, Kubernetes.

Import from the subpackages (``catalog``, ``models``, ``scenario_files``, ``store``, ``bench``,
``k8s``): this package exports nothing.
"""

__all__: list[str] = []

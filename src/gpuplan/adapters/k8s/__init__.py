"""Kubernetes adapter: manifests built as plain dicts from a fleet or recommend plan
(``pools``, ``labels``, ``engine_args``, ``manifests``; pure), schema checks (``validate``), and the
cluster inventory and server-side apply through the official ``kubernetes`` client (``inventory``,
``cluster``); writing and applying them is ``gpuplan.usecases.deploy``. ``kubernetes`` and
``kubernetes-validate`` are optional (extra ``k8s``) and imported only where used.

Import from the submodules: this package exports nothing.
"""

__all__: list[str] = []

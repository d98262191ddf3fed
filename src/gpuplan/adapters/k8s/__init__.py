"""Kubernetes adapter: manifests built as plain dicts from a fleet or recommend plan
(``pools``, ``engines``, ``manifests``; pure), schema checks (``validate``), the cluster inventory
and server-side apply through the official ``kubernetes`` client (``inventory``, ``cluster``), and
file handling (``render``). ``kubernetes`` and ``kubernetes-validate`` are optional (extra ``k8s``)
and imported only where used."""

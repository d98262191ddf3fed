"""A local stand-in for the few Kubernetes API endpoints gpuplan uses (no cluster is available in CI).

Serves on 127.0.0.1 only, on a free port, from a daemon thread: ``GET /api/v1/nodes``,
``GET /api/v1/pods`` and server-side apply ``PATCH`` (``dryRun=All`` honoured). Objects whose name
is in ``reject`` fail admission with HTTP 422, like a webhook or a quota would.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

HANDLER_TIMEOUT_S = 5


@dataclass
class FakeKube:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    reject: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # a TCP server: bytes addresses are only for AF_UNIX
        return f"http://{host}:{port}"

    def start(self) -> FakeKube:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            timeout = HANDLER_TIMEOUT_S

            def log_message(self, *_args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                fake.requests.append(("GET", url.path, parse_qs(url.query)))
                if url.path == "/api/v1/nodes":
                    self._send(200, {"kind": "NodeList", "apiVersion": "v1", "items": fake.nodes})
                elif url.path == "/api/v1/pods":
                    self._send(200, {"kind": "PodList", "apiVersion": "v1", "items": fake.pods})
                else:
                    self._send(404, {"kind": "Status", "message": f"{url.path} not found"})

            def do_PATCH(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                fake.requests.append(("PATCH", url.path, query))
                length = int(self.headers.get("Content-Length", "0"))
                obj = json.loads(self.rfile.read(length) or b"{}")
                if self.headers.get("Content-Type") != "application/apply-patch+yaml":
                    self._send(415, {"kind": "Status", "message": "want application/apply-patch+yaml"})
                elif obj.get("metadata", {}).get("name") in fake.reject:
                    self._send(422, {"kind": "Status", "message": "admission webhook denied the request"})
                else:
                    if query.get("dryRun") != ["All"]:
                        fake.applied[url.path] = obj
                    self._send(200, obj)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, directory: Path) -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
            "current-context": "fake",
        }
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        return path


def gpu_node(name: str, product: str, memory_mib: int, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory_mib)},
        },
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", **allocatable}},
    }


def gpu_pod(
    name: str, node: str, limits: dict[str, str], *, managed: bool = False, phase: str = "Running"
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "gpuplan"} if managed else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": phase},
    }


def sample_cluster() -> FakeKube:
    """Two A100 nodes (one partitioned into 1g.10gb slices, mixed strategy) and one A10 node."""
    return FakeKube(
        nodes=[
            gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB", 81920, {"nvidia.com/gpu": "8"}),
            gpu_node("a100-mig", "NVIDIA-A100-SXM4-80GB", 81920, {"nvidia.com/mig-1g.10gb": "14"}),
            gpu_node("a10-0", "NVIDIA-A10", 23028, {"nvidia.com/gpu": "4"}),
            {"metadata": {"name": "cpu-0", "labels": {}}, "status": {"allocatable": {"cpu": "32"}}},
        ],
        pods=[
            gpu_pod("train", "a100-0", {"nvidia.com/gpu": "4"}),
            gpu_pod("chat", "a10-0", {"nvidia.com/gpu": "2"}, managed=True),
            gpu_pod("done", "a10-0", {"nvidia.com/gpu": "2"}, phase="Succeeded"),
            gpu_pod("small", "a100-mig", {"nvidia.com/mig-1g.10gb": "3"}),
        ],
    )

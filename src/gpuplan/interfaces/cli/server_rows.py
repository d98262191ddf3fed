"""The rows of the server-vs-client view of a stored run (its summary's ``server_vs_client``, docs/bench.md):
latencies from the server's histograms beside the client's own, the server's counters beside the
client's totals, and the load the server reported during the run. Shared by ``bench serve``/``results
show`` (rich tables) and ``results report`` (HTML/Markdown tables). A server percentile is shown with
the engine's bucket it was interpolated in (``17.3 (10-25)``): it is known no finer than that bucket.
"""

from __future__ import annotations

from typing import Any

LATENCY_STATS = ("mean", "p50", "p90", "p99")
LATENCY_HEADERS = ["metric", "side", "count", *LATENCY_STATS, "server source"]
COUNTER_HEADERS = ["counter", "server", "client", "server source"]
LOAD_HEADERS = ["server load (during the run)", "mean", "max", "scrapes", "source"]


def latency_rows(view: dict[str, Any]) -> list[list[object]]:
    """Two rows per latency, the server's (bucket-interpolated percentiles) then the client's."""
    rows: list[list[object]] = []
    for key, sides in (view.get("latency_ms") or {}).items():
        server, client = sides.get("server") or {}, sides.get("client") or {}
        cells = [_bucketed(server, k) for k in LATENCY_STATS]
        rows.append([key, "server", server.get("count"), *cells, server.get("source")])
        rows.append([key, "client", None, *(client.get(k) for k in LATENCY_STATS), None])
    return rows


def _bucketed(server: dict[str, Any], stat: str) -> object:
    """A server percentile with the bucket it was interpolated in: ``17.3 (10-25)``; the mean as is."""
    value, bounds = server.get(stat), (server.get("bucket_ms") or {}).get(stat)
    if value is None or not bounds:
        return value
    upper = "inf" if bounds[1] is None else f"{bounds[1]:.4g}"
    return f"{value:.4g} ({bounds[0]:.4g}-{upper})"


def counter_rows(view: dict[str, Any]) -> list[list[object]]:
    return [
        [key, c.get("server"), c.get("client"), c.get("source")]
        for key, c in (view.get("counters") or {}).items()
    ]


def load_rows(view: dict[str, Any]) -> list[list[object]]:
    return [
        [key, g.get("mean"), g.get("max"), g.get("scrapes"), g.get("source")]
        for key, g in (view.get("load") or {}).items()
    ]

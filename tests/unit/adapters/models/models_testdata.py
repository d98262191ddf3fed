"""Helpers for the model tests: the bundled configs as raw dicts."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parents[4] / "src" / "gpuplan" / "data" / "models" / "configs"


def index_rows() -> list[dict[str, str]]:
    with (CONFIG_DIR / "INDEX.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def raw_config(hf_id: str) -> dict[str, Any]:
    """The bundled config.json of ``hf_id`` as a fresh dict."""
    row = next(r for r in index_rows() if r["hf_id"] == hf_id)
    config: dict[str, Any] = json.loads((CONFIG_DIR / row["file"]).read_text(encoding="utf-8"))
    return config


def all_raw_configs() -> dict[str, dict[str, Any]]:
    """hf_id → raw config of every bundled model."""
    return {
        row["hf_id"]: json.loads((CONFIG_DIR / row["file"]).read_text(encoding="utf-8"))
        for row in index_rows()
    }

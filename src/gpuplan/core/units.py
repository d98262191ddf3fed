"""Unit constants: the one place where GB, GiB, TFLOPS and friends are defined.

Quantities are stored in SI base units in field names (``_bytes``, ``_bytes_per_s``, ``_s``,
``_flops``); these constants convert at the edges (input parsing and rendering).
"""

from __future__ import annotations

__all__ = [
    "GB",
    "GBIT_BYTES",
    "GIB",
    "HOURS_PER_MONTH",
    "HOURS_PER_YEAR",
    "KB",
    "KIB",
    "MB",
    "MIB",
    "MILLION",
    "MS_PER_S",
    "PFLOPS",
    "S_PER_HOUR",
    "TB",
    "TFLOPS",
    "W_PER_KW",
    "gb",
    "gib",
]

KB = 1e3
MB = 1e6
GB = 1e9
"""Decimal gigabyte: vendor memory sizes and link bandwidths are quoted in GB and GB/s."""
TB = 1e12
GBIT_BYTES = GB / 8
"""Bytes in one gigabit: network links are quoted in Gb/s (400 Gb/s = 50 GB/s)."""
KIB = 1024.0
MIB = 1024.0**2
GIB = 1024.0**3
"""Binary gibibyte: PyTorch, vLLM and nvidia-smi report memory in GiB (often printed as "GB")."""

TFLOPS = 1e12
"""Tera floating-point operations per second (vendor datasheets)."""
PFLOPS = 1e15

MS_PER_S = 1e3
S_PER_HOUR = 3600.0
HOURS_PER_MONTH = 730.0
"""Average hours in a month (8760 h / 12), the convention cloud providers bill monthly estimates on."""
HOURS_PER_YEAR = 8760.0
W_PER_KW = 1e3
MILLION = 1e6


def gib(n_bytes: float) -> float:
    """Bytes → GiB."""
    return n_bytes / GIB


def gb(n_bytes: float) -> float:
    """Bytes → decimal GB."""
    return n_bytes / GB

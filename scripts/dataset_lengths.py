"""Percentiles of a benchmark dataset's prompt and answer lengths, for ``data/validation/server_datasets.yaml``.

Reads a CSV with columns ``input_length`` and ``output_length`` (or MLPerf's own names,
``tok_input_length`` / ``tok_output_length``), one row per dataset sample, in any order, and prints the YAML fields: the
means and ``PERCENTILE_POINTS`` percentiles at the centres of equal-probability bins, so that
resampling the percentiles uniformly reproduces the distribution (and its mean) to well under 1 %.

    python scripts/dataset_lengths.py llama2-70b-99.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

PERCENTILE_POINTS = 100
"""Bin centres at 0.5 %, 1.5 % … 99.5 %: the last one carries the P99+ tail."""


def percentiles(values: np.ndarray) -> list[int]:
    """``PERCENTILE_POINTS`` bin-centre percentiles, rounded to whole tokens."""
    centres = (np.arange(PERCENTILE_POINTS) + 0.5) / PERCENTILE_POINTS
    return [int(v) for v in np.rint(np.quantile(values, centres))]


COLUMNS = {
    "input": ("input_length", "tok_input_length"),
    "reference_output": ("output_length", "tok_output_length"),
}
"""Header names accepted for each column (a summary table's, or the MLPerf pickle's own)."""


def read_columns(path: Path) -> dict[str, np.ndarray]:
    """The two length columns of the CSV, found by their header names."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = [name.strip() for name in next(reader)]
        rows = [row for row in reader if row]
    columns = {}
    for key, names in COLUMNS.items():
        found = [header.index(n) for n in names if n in header]
        if not found:
            sys.exit(f"{path}: no {' or '.join(names)} column in the header {header}")
        columns[key] = np.asarray([float(row[found[0]]) for row in rows], dtype=np.float64)
    return columns


def main(path: Path) -> None:
    for name, values in read_columns(path).items():
        points = percentiles(values)
        print(
            f"# {name}: {len(values)} samples, mean {values.mean():.2f}, percentile-atom mean {np.mean(points):.2f}"
        )
        print(f"{name}_tokens_percentiles: {points}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/dataset_lengths.py LENGTHS.csv  (columns input_length,output_length)")
    main(Path(sys.argv[1]))

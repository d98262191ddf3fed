"""Percentiles of a benchmark dataset's prompt and answer lengths, for ``validation/data/server_datasets.yaml``.

Reads a CSV with columns ``input_length,output_length`` (one row per dataset sample; MLPerf's
pickles carry them as ``tok_input_length`` / ``tok_output_length``) and prints the YAML fields: the
means and ``PERCENTILE_POINTS`` percentiles at the centres of equal-probability bins, so that
resampling the percentiles uniformly reproduces the distribution (and its mean) to well under 1 %.

    python scripts/dataset_lengths.py llama2-70b-99.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PERCENTILE_POINTS = 100
"""Bin centres at 0.5 %, 1.5 % … 99.5 %: the last one carries the P99+ tail."""


def percentiles(values: np.ndarray) -> list[int]:
    """``PERCENTILE_POINTS`` bin-centre percentiles, rounded to whole tokens."""
    centres = (np.arange(PERCENTILE_POINTS) + 0.5) / PERCENTILE_POINTS
    return [int(v) for v in np.rint(np.quantile(values, centres))]


def main(path: Path) -> None:
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    for column, name in ((0, "input"), (1, "reference_output")):
        values = table[:, column]
        points = percentiles(values)
        print(f"# {name}: {len(values)} samples, mean {values.mean():.2f}, percentile-atom mean {np.mean(points):.2f}")
        print(f"{name}_tokens_percentiles: {points}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/dataset_lengths.py LENGTHS.csv  (columns input_length,output_length)")
    main(Path(sys.argv[1]))

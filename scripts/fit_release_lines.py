"""Refit the engine release-line factors on the load sweeps and write them into the bundled calibration.

Run: ``python scripts/fit_release_lines.py ../shared/validation/serving_sweeps.csv`` (about five minutes
on a 2-core machine). Only ``release_lines`` of ``src/gpuplan/data/calibration/calibration.yaml``
changes; the other factors keep their ``inference.csv`` fit. Method: ``usecases/calibration/release_lines.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.calibration.release_lines import RELEASE_LINE_GRADES, fit_release_lines
from gpuplan.usecases.validation.cases import read_cases

TARGET = Path(__file__).resolve().parents[1] / "src/gpuplan/data/calibration/calibration.yaml"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: fit_release_lines.py SERVING_SWEEPS_CSV", file=sys.stderr)
        return 2
    _, cases = read_cases(Path(argv[1]))
    cal = default_calibration().model_copy(update={"release_lines": {}})
    lines = fit_release_lines([c for c in cases if c.quality in RELEASE_LINE_GRADES], default_catalog(), cal)
    data = yaml.safe_load(TARGET.read_text(encoding="utf-8"))
    data["release_lines"] = {name: factors.model_dump() for name, factors in lines.items()}
    head = "".join(
        line for line in TARGET.read_text(encoding="utf-8").splitlines(True) if line.startswith("#")
    )
    TARGET.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for name, factors in lines.items():
        print(name, factors.model_dump())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

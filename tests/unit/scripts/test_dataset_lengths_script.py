"""scripts/dataset_lengths.py: bin-centre percentiles of a length table (the source of
src/gpuplan/data/validation/server_datasets.yaml's percentile lists)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "dataset_lengths.py"


def test_percentiles_are_bin_centres_that_keep_the_mean(tmp_path: Path) -> None:
    # Prompts 1..1000 and answers 2x them: the 0.5 % point of 1..1000 is 1 + 0.005 x 999 = 5.995 -> 6,
    # the 99.5 % point 995.005 -> 995, and the 100 atoms average 500.5 like the data.
    table = tmp_path / "lengths.csv"
    table.write_text("input_length,output_length\n" + "".join(f"{i},{2 * i}\n" for i in range(1, 1001)))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(table)], capture_output=True, text=True, check=True
    ).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if not line.startswith("#"))
    prompts = ast.literal_eval(fields["input_tokens_percentiles"])
    answers = ast.literal_eval(fields["reference_output_tokens_percentiles"])
    assert len(prompts) == 100 and prompts[0] == 6 and prompts[-1] == 995
    assert abs(sum(prompts) / 100 - 500.5) < 0.5
    assert answers[0] == 12 and answers[-1] == 1990


def test_usage_error_names_the_expected_columns() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode != 0 and "input_length,output_length" in done.stderr


def test_columns_are_found_by_name_in_any_order(tmp_path: Path) -> None:
    table = tmp_path / "pickle_columns.csv"
    table.write_text(
        "tok_output_length,id,tok_input_length\n" + "".join(f"{2 * i},x{i},{i}\n" for i in range(1, 101))
    )
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(table)], capture_output=True, text=True, check=True
    ).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if not line.startswith("#"))
    assert ast.literal_eval(fields["input_tokens_percentiles"])[-1] == 100
    assert ast.literal_eval(fields["reference_output_tokens_percentiles"])[-1] == 199
    missing = tmp_path / "missing.csv"
    missing.write_text("a,b\n1,2\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(missing)], capture_output=True, text=True)
    assert done.returncode != 0 and "no input_length or tok_input_length column" in done.stderr

"""The playbooks in docs/playbooks/ show what gpuplan prints: regenerate them in --check mode.

Every playbook command is offline and CPU-only (no network beyond a loopback mock server, no GPU), so
nothing is skipped; the measuring steps of playbook 10 that would need a GPU or wall-clock timings are not
run markers: their recorded H200 output is converted to docs/playbooks/inputs/h200-results.csv, which
must match the JSON it came from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_playbooks_match_what_gpuplan_prints() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "playbooks.py"), "--check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        "docs/playbooks drifted from gpuplan's output; run `python3 scripts/playbooks.py` and review:\n"
        + proc.stdout[-20000:]
        + proc.stderr[-2000:]
    )


def test_h200_results_csv_matches_the_recorded_json() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results = ROOT / "benchmarks" / "results"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_json_to_csv.py"),
            str(results / "h200_bench_gpu.json"),
            str(results / "h200_bench_train_qwen3-0.6b.json"),
            "--conditions",
            "driver 580.159.04, torch 2.11.0+cu130, measured 2026-11-29",
            "-o",
            str(ROOT / "docs" / "playbooks" / "inputs" / "h200-results.csv"),
            "--check",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr

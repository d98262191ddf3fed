"""The playbooks in docs/playbooks/ show what gpuplan prints: regenerate them in --check mode.

Every playbook command is offline and CPU-only (no network, no GPU), so nothing is skipped; the
measuring steps of playbook 10 that would need a GPU or wall-clock timings are not run markers.
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

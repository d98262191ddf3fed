"""Highest constant rate of 32-token streams (mock TTFT 50 ms, ITL 10 ms) the load tester holds.

"Holds" = achieved rate within 1 % of target, no failed request and mean TTFT **from the scheduled
send** within 5 ms of 50 ms. The mock runs in its own process on loopback; its own lateness is printed
beside every row, with the client's CPU per request. The rate is found by doubling from ``--start``
until a step fails, then bisecting (``--steps`` runs at most). Peers (vllm bench serve, GuideLLM) are
not run here: they need their own venvs (see docs/bench.md).

    PYTHONPATH=src python3 benchmarks/bench_loadgen.py [--seconds 5] [--start 100] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import httpx

from gpuplan.adapters.bench.load import runner
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import summarise

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEADER = (
    "| target req/s | achieved | mean TTFT from schedule ms | p99 TTFT from schedule ms | client send lag "
    "mean ms | client CPU ms/req | mock lateness mean ms | mock lateness p99 ms | mock CPU ms/req | held |"
)


def step(url: str, rate: float, seconds: float, workers: int) -> tuple[bool, list[object]]:
    httpx.post(url + "/mock/reset", trust_env=False)
    cfg = LoadConfig(
        url=url,
        model="mock",
        rate_rps=rate,
        arrival="constant",
        duration_s=seconds,
        warmup_s=1.0,
        input_tokens=64,
        output_tokens=32,
        request_timeout_s=30.0,
        workers=workers,
    )
    out = runner.run(cfg, lambda r: None)
    s = summarise("bench", cfg, out.records, out.loop_lag_ms, out.cpu_s, len(out.records))
    stats = httpx.get(url + "/mock/stats", trust_env=False).json()
    mock = stats["lateness_ms"]
    mock_cpu = stats["cpu_s"] * 1e3 / max(stats["requests"], 1)
    ttft = s.ttft_from_schedule_ms.mean or float("inf")
    held = abs(s.achieved_rate_rps - rate) <= 0.01 * rate and abs(ttft - 50.0) <= 5.0 and not s.errors
    return held, [
        f"{rate:g}",
        round(s.achieved_rate_rps, 1),
        round(ttft, 2),
        round(s.ttft_from_schedule_ms.p99 or 0, 1),
        round(s.client.send_lag_ms.mean or 0, 2),
        round(s.client.cpu_ms_per_request or 0, 3),
        round(mock["mean"], 2),
        round(mock["p99"], 1),
        round(mock_cpu, 3),
        "yes" if held else "no",
    ]


def search(url: str, args: argparse.Namespace) -> float:
    best, worst, rate = 0.0, float("inf"), float(args.start)
    for _ in range(args.steps):
        held, row = step(url, rate, args.seconds, args.workers)
        print("| " + " | ".join(str(v) for v in row) + " |", flush=True)
        if held:
            best = rate
        else:
            worst = rate
        if worst - best <= args.resolution * best:
            break
        rate = rate * 2 if worst == float("inf") else round((best + worst) / 2, -1) or (best + worst) / 2
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--start", type=float, default=100.0)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--resolution", type=float, default=0.05, help="stop when the bracket is this narrow")
    parser.add_argument("--workers", type=int, default=1, help="client processes")
    args = parser.parse_args()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuplan",
            "mock-server",
            "--port",
            "0",
            "--ttft-ms",
            "50",
            "--itl-ms",
            "10",
            "--max-concurrency",
            "100000",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[-1]
    print(HEADER)
    print("|---" * 10 + "|")
    try:
        best = search(url, args)
    finally:
        proc.terminate()
        proc.wait(10)
    print(
        f"highest rate held: {best:g} req/s (client workers: {args.workers}, load average {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()

"""Highest constant rate of 32-token streams (mock TTFT 50 ms, ITL 10 ms) the load tester holds.

"Holds" = achieved rate within 1 % of target and mean TTFT **from the scheduled send** within 5 ms of
50 ms. The mock runs in its own process on loopback; its own lateness is printed beside every row.
Peers (vllm bench serve, GuideLLM) are not run here: they need their own venvs (see docs/bench.md).

    PYTHONPATH=src python3 benchmarks/bench_loadgen.py [--seconds 5] [--rates 100,200,400,...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx

from gpuplan.bench.load import runner
from gpuplan.bench.load.config import LoadConfig
from gpuplan.bench.load.summary import summarize

SRC = str(Path(__file__).resolve().parents[1] / "src")


def step(url: str, rate: float, seconds: float) -> list[object]:
    httpx.post(url + "/mock/reset")
    cfg = LoadConfig(url=url, model="mock", rate_rps=rate, arrival="constant", duration_s=seconds, warmup_s=1.0,
                     input_tokens=64, output_tokens=32, request_timeout_s=30.0)
    out = asyncio.run(runner.run(cfg, lambda r: None))
    s = summarize("bench", cfg, out.records, out.loop_lag_ms)
    mock = httpx.get(url + "/mock/stats").json()["lateness_ms"]
    ttft = s.ttft_from_schedule_ms.mean or float("inf")
    held = abs(s.achieved_rate - rate) <= 0.01 * rate and abs(ttft - 50.0) <= 5.0 and not s.errors
    return [rate, round(s.achieved_rate, 1), round(ttft, 2), round(s.ttft_ms.p99 or 0, 1),
            round(s.client.send_lag_ms.mean or 0, 2), round(mock["mean"], 2), round(mock["p99"], 1), held]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="50,100,150,200,300,400,600,800,1000")
    args = parser.parse_args()
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", "--ttft-ms", "50",
                             "--itl-ms", "10", "--max-concurrency", "100000"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[-1]
    print("| target req/s | achieved | mean TTFT from schedule ms | p99 TTFT ms | client send lag ms "
          "| mock lateness mean ms | mock lateness p99 ms | held |")
    print("|---|---|---|---|---|---|---|---|")
    best = 0.0
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            row = step(url, rate, args.seconds)
            print("| " + " | ".join(str(v) for v in row) + " |", flush=True)
            if not row[-1]:
                break
            best = rate
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"highest rate held: {best:g} req/s")


if __name__ == "__main__":
    main()

"""The load generator's limits against the mock server, in two modes.

``--mode rate`` (default): the highest constant rate of 32-token streams (mock TTFT 50 ms, ITL 10 ms) the
load tester holds. "Holds" = achieved rate within 1 % of target, no failed request and mean TTFT **from
the scheduled send** within 5 ms of 50 ms. The mock runs in its own process on loopback; its own lateness
is printed beside every row, with the client's CPU per request. The rate is found by doubling from
``--start`` until a step fails, then bisecting (``--steps`` runs at most).

    PYTHONPATH=src python3 benchmarks/bench_loadgen.py [--seconds 5] [--start 100] [--workers 1]

``--mode ceiling``: the most requests/s the client sustains against a mock with no service time (TTFT
0, ITL 0), ``gpuplan bench serve`` and ``vllm bench serve`` side by side on the same mock, with the same
flags, which both tools name alike (``--request-rate inf --num-prompts N --max-concurrency C``,
``--dataset-name random --random-input-len --random-output-len``, ``--ignore-eos``). ``--vllm`` is the
``vllm`` command of a throwaway venv (never a gpuplan dependency; see benchmarks/README.md for how it
was installed); ``vllm bench serve`` needs a tokenizer, so a word-level one over gpuplan's synthetic-prompt
words is written to a temporary folder (its ``tokenizer.json`` by hand: no download). With ``--pin`` (the
default on 2+ cores) the mock runs on CPU 1 and each client on CPU 0, so a client's ceiling is its own
core's. Each tool runs ``N`` and ``4N`` prompts per repeat (the order of the tools alternates between
repeats): the ceiling is the tool's own requests/s of the ``4N`` runs (gpuplan: ``achieved_rate``, vLLM:
``request_throughput``), and the client CPU per request is the difference of the two runs' CPU (user +
system of the process and its children) over the ``3N`` extra requests, so start-up (imports, tokenizer)
cancels out. The mock's CPU per request is beside it (its share of its own core shows whether it, not
the client, was the limit).

    PYTHONPATH=src python3 benchmarks/bench_loadgen.py --mode ceiling --vllm /tmp/vllmvenv/bin/vllm \
        [--prompts 5000] [--concurrency 32] [--repeats 3] [--input-tokens 32] [--output-tokens 16]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from gpuplan.adapters.bench.load import runner
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import summarise
from gpuplan.adapters.bench.tokens import WORDS

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


def start_mock(ttft_ms: float, itl_ms: float, cpu: int | None = None) -> tuple[subprocess.Popen[str], str]:
    """The mock in its own process (on CPU ``cpu`` when given) and its URL."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    command = [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", "--ttft-ms", str(ttft_ms)]
    command += ["--itl-ms", str(itl_ms), "--max-concurrency", "100000"]
    proc = subprocess.Popen(
        [*pin, *command], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC}
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[-1]


def rate_mode(args: argparse.Namespace) -> None:
    proc, url = start_mock(50.0, 10.0)
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


def write_tokenizer(folder: Path) -> Path:
    """A word-level Hugging Face tokenizer over gpuplan's prompt words (``vllm bench serve`` needs one to
    build its random prompts); the files are written by hand, so nothing is downloaded."""
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    special = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
        | {"special": True}
        for t, i in list(vocab.items())[:3]
    ]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }  # fmt: skip
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "bos_token": "<s>"}
    config |= {"eos_token": "</s>", "model_max_length": 1_000_000}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def load_flags(args: argparse.Namespace, prompts: int) -> list[str]:
    """The flags both tools name alike."""
    return [
        "--model", "mock", "--dataset-name", "random", "--random-input-len", str(args.input_tokens),
        "--random-output-len", str(args.output_tokens), "--num-prompts", str(prompts), "--request-rate", "inf",
        "--max-concurrency", str(args.concurrency), "--ignore-eos", "--temperature", "0",
    ]  # fmt: skip


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``command``; (wall s, CPU s of it and its children, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{command[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


Measured = tuple[float, int, float, float]
"""(req/s as the tool reports it, completed requests, wall s, client CPU s) of one run."""


def run_gpuplan(url: str, args: argparse.Namespace, prompts: int, work: Path) -> Measured:
    command = [*args.client_pin, sys.executable, "-m", "gpuplan", "bench", "serve", "--url", url]
    command += [*load_flags(args, prompts), "--store", f"sqlite:///{work / 'runs.sqlite'}"]
    wall, cpu, out = timed([*command, "--no-progress", "--format", "json"], {**os.environ, "PYTHONPATH": SRC})
    summary = json.loads(out)
    return summary["achieved_rate"], summary["requests_completed"], wall, cpu


def run_vllm(url: str, args: argparse.Namespace, prompts: int, work: Path) -> Measured:
    command = [*args.client_pin, args.vllm, "bench", "serve", "--backend", "vllm", "--base-url", url]
    command += ["--tokenizer", str(args.tokenizer), *load_flags(args, prompts), "--disable-tqdm"]
    command += ["--save-result", "--result-dir", str(work), "--result-filename", "vllm.json"]
    wall, cpu, _ = timed(command, dict(os.environ))
    result = json.loads((work / "vllm.json").read_text(encoding="utf-8"))
    return result["request_throughput"], result["completed"], wall, cpu


TOOLS = {"gpuplan": run_gpuplan, "vllm bench serve": run_vllm}
COLUMNS = ("repeat", "client", "prompts", "req/s (its own)", "completed", "wall s", "client CPU s")
COLUMNS += ("mock CPU ms/req", "load avg")


def row(cells: list[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def measure(
    url: str, args: argparse.Namespace, name: str, repeat: int, work: Path
) -> tuple[float, float, float]:
    """One tool's ``N`` and ``4N`` runs (a table row each): (ceiling req/s, client CPU ms/request by the
    difference of the two, mock CPU ms/request)."""
    cpus, rps, mock_ms = [], 0.0, 0.0
    for prompts in (args.prompts, 4 * args.prompts):
        httpx.post(url + "/mock/reset", trust_env=False)
        load = os.getloadavg()[0]
        rps, done, wall, cpu = TOOLS[name](url, args, prompts, work)
        stats = httpx.get(url + "/mock/stats", trust_env=False).json()
        mock_ms = stats["cpu_s"] * 1e3 / max(stats["requests"], 1)
        cells = [repeat, name, prompts, f"{rps:,.0f}", done, f"{wall:.1f}", f"{cpu:.2f}", f"{mock_ms:.3f}"]
        print(row([*cells, f"{load:.2f}"]), flush=True)
        cpus.append(cpu)
    return rps, (cpus[1] - cpus[0]) * 1e3 / (3 * args.prompts), mock_ms


def ceiling_mode(args: argparse.Namespace) -> None:
    if args.vllm is None or shutil.which(args.vllm) is None:
        raise SystemExit("--mode ceiling needs --vllm PATH: the vllm command of a throwaway venv")
    pin = args.pin and (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None
    args.client_pin = ["taskset", "-c", "0"] if pin else []
    proc, url = start_mock(0.0, 0.0, cpu=1 if pin else None)
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in TOOLS}
    print(row(list(COLUMNS)))
    print("|---" * len(COLUMNS) + "|")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            args.tokenizer = write_tokenizer(Path(tmp))
            for repeat in range(1, args.repeats + 1):
                for name in list(TOOLS) if repeat % 2 else list(reversed(TOOLS)):
                    rows[name].append(measure(url, args, name, repeat, Path(tmp)))
    finally:
        proc.terminate()
        proc.wait(10)
    report(rows, pin)


REPORT_COLUMNS = ("client", "ceiling req/s (median of repeats)", "min–max", "client CPU ms/request (median)")
REPORT_COLUMNS += ("one core's worth, req/s (1 s / CPU per request)", "mock CPU ms/req")


def report(rows: dict[str, list[tuple[float, float, float]]], pinned: bool) -> None:
    """Per tool: the median ceiling and its range, the median CPU per request and what one core would
    serve at that cost (1 s / CPU per request: the ceiling of a client alone on its core), the mock's CPU."""
    print("\n" + row([*REPORT_COLUMNS]) + "\n" + "|---" * len(REPORT_COLUMNS) + "|")
    medians, cpus = {}, {}
    for name, values in rows.items():
        rps = [v[0] for v in values]
        medians[name], cpus[name] = statistics.median(rps), statistics.median(v[1] for v in values)
        mock = statistics.median(v[2] for v in values)
        span = f"{min(rps):,.0f}–{max(rps):,.0f}"
        print(
            row(
                [
                    name,
                    f"{medians[name]:,.0f}",
                    span,
                    f"{cpus[name]:.3f}",
                    f"{1e3 / cpus[name]:,.0f}",
                    f"{mock:.3f}",
                ]
            )
        )
    ratio = medians["gpuplan"] / medians["vllm bench serve"]
    per_request = cpus["vllm bench serve"] / cpus["gpuplan"]
    where = "client on CPU 0, mock on CPU 1" if pinned else "not pinned"
    print(
        f"\ngpuplan / vllm bench serve: ceiling {ratio:.2f}x, CPU per request {per_request:.2f}x less", end=""
    )
    print(f" ({where}; load average now {os.getloadavg()[0]:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("rate", "ceiling"), default="rate")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--start", type=float, default=100.0)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--resolution", type=float, default=0.05, help="stop when the bracket is this narrow")
    parser.add_argument("--workers", type=int, default=1, help="client processes")
    parser.add_argument("--vllm", help="ceiling: the vllm command of a throwaway venv")
    parser.add_argument("--prompts", type=int, default=5000, help="ceiling: N (each tool runs N and 4N)")
    parser.add_argument("--concurrency", type=int, default=32, help="ceiling: --max-concurrency")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--input-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True, help="ceiling: taskset")
    args = parser.parse_args()
    if args.mode == "rate":
        rate_mode(args)
    else:
        ceiling_mode(args)


if __name__ == "__main__":
    main()

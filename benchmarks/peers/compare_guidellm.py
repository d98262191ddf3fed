"""Side-by-side: GuideLLM (peer load generator) and ``gpuplan bench serve`` against a mock of known latency.

The script starts ``gpuplan mock-server`` (TTFT 50 ms, ITL 10 ms by default: a request of N output
tokens ends at 50 + (N-1)*10 ms), then runs both load generators at the same loads, one after the
other, resetting the mock before each run, and prints markdown tables next to the truth.

GuideLLM is NOT a gpuplan dependency. Install it in a throwaway virtualenv:

    python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install guidellm==0.8.1
    .venv/bin/python benchmarks/peers/compare_guidellm.py [--peer-venv /tmp/peervenv]
        [--rates 5,20,50,100,200] [--concurrency 1,16,64] [--duration 25] [--json-out FILE]

The peer venv may also be given as ``$GUIDELLM_VENV``. Run from anywhere; only the standard library
is imported here (both tools run as subprocesses).

How the two are made to send the same requests:
* ``/v1/completions``, streaming (GuideLLM's openai_http backend streams by default and asks for
  ``stream_options.include_usage``; gpuplan streams always), ``max_tokens`` = output tokens (the mock
  streams exactly ``max_tokens`` tokens, ignoring EOS).
* Prompts: gpuplan draws N synthetic words. GuideLLM's synthetic data needs a Hugging Face tokenizer
  (it encodes Faker text and cuts it at N tokens); the Hub is not needed: a word-level tokenizer over
  Faker's lorem word list (plus the numbers GuideLLM prefixes each prompt with) is built with the peer
  venv's ``tokenizers``/``transformers`` and passed as a local path. One word = one token, which is
  also how the mock counts prompt tokens.
* Open loop: ``--rate R --arrival constant`` vs GuideLLM profile ``constant`` at rate R; closed loop:
  ``--concurrency C`` vs profile ``concurrent`` with C streams. Both with ``max_duration`` seconds
  and no warm-up. GuideLLM runs with its defaults otherwise (10 worker processes, data prefetch).

Measured per run: each tool's own numbers (parsed from ``--format json`` / GuideLLM's JSON report),
plus, the same way for both, the client's CPU (user + system of the whole process tree, read from
/proc every 0.5 s; "load CPU" counts only the span in which the mock saw the tool's requests, so
start-up and data generation before the first request are left out; "total CPU" is everything,
from ``getrusage(RUSAGE_CHILDREN)``), the mock's own lateness and CPU (``/mock/stats``), and the
1-minute load average before the run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GPUPLAN = REPO / ".venv" / "bin" / "gpuplan"
CLK_TCK = os.sysconf("SC_CLK_TCK")
WORDS = (
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
)

# Run by the peer venv's python: a WordLevel tokenizer whose vocabulary covers Faker's lorem words (as
# written in its sentences: capitalised, with a full stop) and GuideLLM's numeric prompt prefixes.
TOKENIZER_CODE = r"""
import sys
from faker.providers.lorem.en_US import Provider
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = sorted({v for w in Provider.word_list for c in (w, w.capitalize()) for v in (c, c + ".")})
words += [str(i) for i in range(200_000)] + [f"m{i}" for i in range(10)]
vocab = {"<unk>": 0} | {w: i + 1 for i, w in enumerate(dict.fromkeys(words))}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(sys.argv[1])
"""


@dataclass(frozen=True)
class Load:
    """One load point: open loop at ``value`` req/s or closed loop with ``value`` requests in flight."""

    kind: str  # "rate" or "concurrency"
    value: float

    @property
    def label(self) -> str:
        """Short name for the tables."""
        return f"rate {self.value:g}" if self.kind == "rate" else f"conc {self.value:g}"


@dataclass
class Settings:
    """What both tools are asked to do."""

    url: str
    duration: float
    input_tokens: int
    output_tokens: int
    ttft_ms: float
    itl_ms: float
    workdir: Path
    peer: Path
    peer_env: dict[str, str] = field(default_factory=dict)
    peer_data: str = "synthetic"
    quiet_load: float = 0.0
    quiet_wait_s: float = 0.0
    tokenizer: Path = field(default_factory=Path)


@dataclass
class Row:
    """One tool at one load: parsed metrics (``m``) and the resources around it."""

    tool: str
    load: Load
    m: dict[str, float | None]
    res: dict[str, float | None]
    note: str = ""


def http_json(url: str, data: bytes | None = None) -> dict[str, Any]:
    """GET (or POST ``data``) a JSON endpoint on loopback, no proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, data=data), timeout=10) as resp:
        out: dict[str, Any] = json.loads(resp.read())
        return out


class Mock:
    """``gpuplan mock-server`` in a subprocess of this script."""

    def __init__(self, port: int, ttft_ms: float, itl_ms: float, log: Path) -> None:
        """Start the mock and wait until /health answers."""
        self.url = f"http://127.0.0.1:{port}"
        cmd = [
            str(GPUPLAN),
            "mock-server",
            "--port",
            str(port),
            "--ttft-ms",
            str(ttft_ms),
            "--itl-ms",
            str(itl_ms),
            "--max-concurrency",
            "100000",
        ]
        self.log = log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                http_json(self.url + "/health")
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mock exited, see {log}") from None
                time.sleep(0.1)
        raise RuntimeError("mock did not start in 30 s")

    def reset(self) -> None:
        """Zero the mock's counters and lateness histogram."""
        http_json(self.url + "/mock/reset", data=b"")

    def stats(self) -> dict[str, Any]:
        """The mock's /mock/stats."""
        return http_json(self.url + "/mock/stats")

    def stop(self) -> None:
        """Terminate the mock (kill after 10 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, CPU seconds of the process and its reaped children) for every readable process."""
    table: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        ticks = sum(int(x) for x in rest[11:15])  # utime, stime, cutime, cstime
        table[int(entry.name)] = (int(rest[1]), ticks / CLK_TCK)
    return table


def tree_cpu_s(root: int) -> float | None:
    """CPU seconds used so far by ``root`` and all its descendants (live, or dead and reaped); None once gone."""
    table = _proc_table()
    if root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += table.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return total


class Sampler(threading.Thread):
    """Every ``period`` s: (time, client tree CPU, mock requests seen, mock requests completed)."""

    def __init__(self, pid: int, mock: Mock, period: float = 0.5) -> None:
        """Sample the process tree rooted at ``pid``."""
        super().__init__(daemon=True)
        self.pid, self.mock, self.period = pid, mock, period
        self.samples: list[tuple[float, float, int, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        """Sample until ``halt`` is set; samples taken after the tool exited are dropped."""
        while not self.halt.is_set():
            try:
                s = self.mock.stats()
                cpu = tree_cpu_s(self.pid)
            except OSError:
                cpu = None
            if cpu is not None:
                self.samples.append((time.monotonic(), cpu, s["requests"], s["completed"]))
            self.halt.wait(self.period)

    def load_cpu_ms_per_request(self) -> float | None:
        """Client CPU per request over the span in which the mock saw this run's requests."""
        s = self.samples
        if len(s) < 2 or s[-1][2] == 0:
            return None
        start = max((i for i, x in enumerate(s) if x[2] == 0), default=0)
        end = next(i for i, x in enumerate(s) if x[2:] == s[-1][2:])
        sent = s[end][2] - s[start][2]
        return (s[end][1] - s[start][1]) * 1e3 / sent if sent > 0 else None


def children_cpu_s() -> float:
    """User + system CPU of this script's reaped children (the tool and every process it waited for)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def build_tokenizer(cfg: Settings) -> Path:
    """Build the local word-level tokenizer GuideLLM needs (no Hub access) with the peer venv."""
    path = cfg.workdir / "tokenizer"
    if not (path / "tokenizer.json").exists():
        subprocess.run([str(cfg.peer / "bin" / "python"), "-c", TOKENIZER_CODE, str(path)], check=True)
    return path


def gpuplan_cmd(cfg: Settings, load: Load) -> list[str]:
    """``gpuplan bench serve`` for this load, JSON summary on stdout."""
    mode = (
        ["--rate", f"{load.value:g}", "--arrival", "constant"]
        if load.kind == "rate"
        else ["--concurrency", str(int(load.value))]
    )
    return [
        str(GPUPLAN),
        "bench",
        "serve",
        "--url",
        cfg.url,
        "--model",
        "mock",
        *mode,
        "--duration",
        f"{cfg.duration:g}",
        "--input-tokens",
        str(cfg.input_tokens),
        "--output-tokens",
        str(cfg.output_tokens),
        "--store",
        f"sqlite:///{cfg.workdir}/store.sqlite",
        "--no-progress",
        "--format",
        "json",
    ]


def write_prompt_file(cfg: Settings, load: Load, path: Path) -> Path:
    """JSONL prompts for GuideLLM's file source: enough rows for the run, N words each, fixed output length."""
    e2e_s = (cfg.ttft_ms + (cfg.output_tokens - 1) * cfg.itl_ms) / 1e3
    rps = load.value if load.kind == "rate" else load.value / e2e_s
    rng = random.Random(0)
    with path.open("w") as f:
        for i in range(math.ceil(rps * cfg.duration * 1.5) + 100):
            words = " ".join(rng.choice(WORDS) for _ in range(cfg.input_tokens - 1))
            f.write(json.dumps({"prompt": f"{i} {words}", "output_tokens_count": cfg.output_tokens}) + "\n")
    return path


def guidellm_scenario(cfg: Settings, load: Load, report: Path) -> dict[str, Any]:
    """GuideLLM 0.8 scenario (``guidellm run -c FILE``) for this load."""
    profile: dict[str, Any] = (
        {"kind": "constant", "rate": [load.value]}
        if load.kind == "rate"
        else {"kind": "concurrent", "streams": [int(load.value)]}
    )
    data = (
        {"kind": "synthetic_text", "prompt_tokens": cfg.input_tokens, "output_tokens": cfg.output_tokens}
        if cfg.peer_data == "synthetic"
        else {"kind": "json_file", "path": str(write_prompt_file(cfg, load, report.with_suffix(".jsonl")))}
    )
    return {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": cfg.url,
                "model": "mock",
                "request_format": "/v1/completions",
                "stream": True,
            },
            "profile": profile,
            "tokenizer": {"kind": "hf_auto", "model": str(cfg.tokenizer)},
            "data": [data],
            "constraints": [{"kind": "max_duration", "seconds": cfg.duration}],
            "outputs": [{"kind": "json", "path": str(report)}],
        }
    }


def guidellm_cmd(cfg: Settings, load: Load, report: Path) -> list[str]:
    """Write the scenario file and return the ``guidellm run`` command line."""
    scenario = report.with_suffix(".scenario.json")
    scenario.write_text(json.dumps(guidellm_scenario(cfg, load, report), indent=1))
    return [str(cfg.peer / "bin" / "guidellm"), "run", "-c", str(scenario), "--disable-progress"]


def parse_gpuplan(out: dict[str, Any]) -> dict[str, float | None]:
    """Common metric names from a ``bench serve --format json`` summary."""
    return {
        "sent_rps": out["requests_sent"] / out["duration_s"] if out["mode"] == "rate" else None,
        "tool_rps": out["achieved_rate"],
        "out_tps": out["output_tokens_per_s"],
        "ttft_mean": out["ttft_ms"]["mean"],
        "ttft_p50": out["ttft_ms"]["p50"],
        "ttft_p99": out["ttft_ms"]["p99"],
        "ttft_sched_mean": out["ttft_from_schedule_ms"]["mean"] if out["mode"] == "rate" else None,
        "itl_mean": out["tpot_ms"]["mean"],
        "itl_p99": out["tpot_ms"]["p99"],
        "e2e_mean": out["e2e_ms"]["mean"],
        "ok": out["requests_completed"],
        "errors": out["requests_failed"],
        "cut": 0,
        "send_lag_mean": out["client"]["send_lag_ms"]["mean"] if out["mode"] == "rate" else None,
        "self_cpu_ms": out["client"]["cpu_ms_per_request"],
        "prompt_tokens": out["input_tokens_mean"],
    }


def _mean(xs: list[float]) -> float | None:
    """Mean, None when empty."""
    return statistics.fmean(xs) if xs else None


def _gl_dist(metrics: dict[str, Any], name: str, scale: float = 1.0) -> tuple[float, float, float]:
    """(mean, median, p99) of a GuideLLM distribution over successful requests."""
    d = metrics[name]["successful"]
    return d["mean"] * scale, d["median"] * scale, d["percentiles"]["p99"] * scale


def _gl_timing(bench: dict[str, Any]) -> tuple[float, list[float], list[float]]:
    """Requests started, send lags (ms) and TTFT from the targeted start (ms), from the request records."""
    recs = [r for kind in ("successful", "errored", "incomplete") for r in bench["requests"][kind] or []]
    started = [r["info"]["timings"] for r in recs if r["info"]["timings"].get("request_start")]
    lags = [(t["request_start"] - t["targeted_start"]) * 1e3 for t in started if t.get("targeted_start")]
    ttft = [
        (t["first_token_iteration"] - t["targeted_start"]) * 1e3
        for t in started
        if t.get("targeted_start") and t.get("first_token_iteration")
    ]
    return float(len(started)), lags, ttft


def parse_guidellm(report: dict[str, Any], rate_mode: bool) -> dict[str, float | None]:
    """Common metric names from GuideLLM's JSON report (first benchmark)."""
    bench = report["benchmarks"][0]
    m = bench["metrics"]
    ttft = _gl_dist(m, "time_to_first_token_ms")
    itl = _gl_dist(m, "inter_token_latency_ms")
    started, lags, ttft_sched = _gl_timing(bench)
    totals = m["request_totals"]
    return {
        "sent_rps": started / bench["duration"] if rate_mode else None,
        "tool_rps": m["requests_per_second"]["successful"]["mean"],
        "out_tps": m["output_tokens_per_second"]["total"]["mean"],
        "ttft_mean": ttft[0],
        "ttft_p50": ttft[1],
        "ttft_p99": ttft[2],
        "ttft_sched_mean": _mean(ttft_sched) if rate_mode else None,
        "itl_mean": itl[0],
        "itl_p99": itl[2],
        "gl_tpot_mean": m["time_per_output_token_ms"]["successful"]["mean"],
        "e2e_mean": m["request_latency"]["successful"]["mean"] * 1e3,
        "ok": totals["successful"],
        "errors": totals["errored"],
        "cut": totals["incomplete"],
        "send_lag_mean": _mean(lags) if rate_mode else None,
        "prompt_tokens": m["prompt_token_count"]["successful"]["mean"],
    }


def run_tool(
    cmd: list[str], mock: Mock, log: Path, timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str, dict[str, float | None]]:
    """Run one tool under the CPU sampler (``env`` added to the environment); (exit code, stdout, resources)."""
    mock.reset()
    load_avg = os.getloadavg()[0]
    cpu0 = children_cpu_s()
    with log.open("w") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=log.parent, env=os.environ | (env or {})
        )
        sampler = Sampler(proc.pid, mock)
        sampler.start()
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate()
        sampler.halt.set()
        sampler.join()
    stats = mock.stats()
    done = max(stats["completed"], 1)
    return (
        proc.returncode,
        stdout,
        {
            "cpu_total_s": children_cpu_s() - cpu0,
            "cpu_load_ms": sampler.load_cpu_ms_per_request(),
            "mock_late_mean": stats["lateness_ms"]["mean"],
            "mock_late_p99": stats["lateness_ms"]["p99"],
            "mock_cpu_ms": stats["cpu_s"] * 1e3 / done,
            "mock_requests": stats["requests"],
            "mock_prompt_tokens": stats["prompt_tokens"] / done,
            "load_avg": load_avg,
        },
    )


def wait_for_quiet(cfg: Settings) -> None:
    """On a shared machine: wait (at most ``quiet_wait_s``) until the 1-minute load average is under ``quiet_load``."""
    deadline = time.monotonic() + cfg.quiet_wait_s
    while cfg.quiet_load and os.getloadavg()[0] >= cfg.quiet_load and time.monotonic() < deadline:
        time.sleep(5)


def measure(tool: str, load: Load, cfg: Settings, mock: Mock) -> Row:
    """Run ``tool`` at ``load`` and parse what it reports."""
    wait_for_quiet(cfg)
    stem = cfg.workdir / f"{tool}_{load.kind}_{load.value:g}"
    timeout = cfg.duration * 4 + 600
    if tool == "gpuplan":
        rc, out, res = run_tool(gpuplan_cmd(cfg, load), mock, stem.with_suffix(".log"), timeout)
        stem.with_suffix(".json").write_text(out)
        if rc != 0:
            return Row(tool, load, {}, res, f"exit {rc}")
        return Row(tool, load, parse_gpuplan(json.loads(out)), res)
    report = stem.with_suffix(".json")
    report.unlink(missing_ok=True)
    rc, out, res = run_tool(
        guidellm_cmd(cfg, load, report), mock, stem.with_suffix(".log"), timeout, cfg.peer_env
    )
    stem.with_suffix(".console.txt").write_text(out)
    note = " ".join(
        [f"{k}={v}" for k, v in cfg.peer_env.items()]
        + [f"data={cfg.peer_data}"] * (cfg.peer_data != "synthetic")
    )
    if rc != 0 or not report.exists():
        return Row(tool, load, {}, res, f"exit {rc} {note}".strip())
    return Row(tool, load, parse_guidellm(json.loads(report.read_text()), load.kind == "rate"), res, note)


def truth(cfg: Settings, load: Load) -> dict[str, float | None]:
    """What a perfect client reads from the mock at this load."""
    e2e = cfg.ttft_ms + (cfg.output_tokens - 1) * cfg.itl_ms
    rps = load.value if load.kind == "rate" else load.value * 1e3 / e2e
    return {
        "sent_rps": load.value if load.kind == "rate" else None,
        "tool_rps": rps,
        "out_tps": rps * cfg.output_tokens,
        "ttft_mean": cfg.ttft_ms,
        "ttft_p50": cfg.ttft_ms,
        "ttft_p99": cfg.ttft_ms,
        "ttft_sched_mean": cfg.ttft_ms if load.kind == "rate" else None,
        "itl_mean": cfg.itl_ms,
        "itl_p99": cfg.itl_ms,
        "e2e_mean": e2e,
        "errors": 0,
        "send_lag_mean": 0.0,
    }


LATENCY_COLS = [
    ("sent_rps", "sent req/s"),
    ("tool_rps", "reported req/s"),
    ("out_tps", "out tok/s"),
    ("ttft_mean", "TTFT mean"),
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("ttft_sched_mean", "TTFT from schedule mean"),
    ("itl_mean", "ITL/TPOT mean"),
    ("itl_p99", "ITL/TPOT p99"),
    ("e2e_mean", "E2E mean"),
    ("ok", "ok"),
    ("errors", "errors"),
    ("cut", "cut at end"),
]
RESOURCE_COLS = [
    ("send_lag_mean", "send lag mean ms"),
    ("cpu_load_ms", "client CPU ms/req under load"),
    ("cpu_total_s", "client CPU total s"),
    ("self_cpu_ms", "self-reported CPU ms/req"),
    ("mock_late_mean", "mock lateness mean ms"),
    ("mock_late_p99", "mock lateness p99 ms"),
    ("mock_cpu_ms", "mock CPU ms/req"),
    ("mock_prompt_tokens", "prompt tokens (mock)"),
    ("load_avg", "load avg 1 min"),
]


def fmt(v: float | None) -> str:
    """Three significant digits or so; blank for None."""
    if v is None:
        return "–"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v)}"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def table(rows: list[Row], cfg: Settings, cols: list[tuple[str, str]], with_truth: bool) -> str:
    """Markdown table: one line per (load, tool), plus the truth line per load when asked."""
    lines = ["| load | tool | " + " | ".join(h for _, h in cols) + " |", "|---|---|" + "---:|" * len(cols)]
    seen: set[Load] = set()
    for row in rows:
        if with_truth and row.load not in seen:
            seen.add(row.load)
            t = truth(cfg, row.load)
            lines.append(
                f"| {row.load.label} | **truth** | " + " | ".join(fmt(t.get(k)) for k, _ in cols) + " |"
            )
        vals = row.m | row.res
        name = row.tool + (f" ({row.note})" if row.note else "")
        lines.append(f"| {row.load.label} | {name} | " + " | ".join(fmt(vals.get(k)) for k, _ in cols) + " |")
    return "\n".join(lines)


def versions(peer: Path) -> str:
    """Tool and interpreter versions, for the header."""
    gl = subprocess.run([str(peer / "bin" / "guidellm"), "--version"], capture_output=True, text=True).stdout
    py = subprocess.run([str(peer / "bin" / "python"), "--version"], capture_output=True, text=True).stdout
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{gl.strip()} (peer venv {peer}, {py.strip()}); gpuplan at commit {commit} "
        f"(Python {platform.python_version()}); {os.cpu_count()} CPUs, {platform.platform()}"
    )


def parse_args() -> argparse.Namespace:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-venv", type=Path, default=Path(os.environ.get("GUIDELLM_VENV", "/tmp/peervenv")))
    ap.add_argument(
        "--rates", default="5,20,50,100,200", help="open-loop req/s, comma-separated ('' for none)"
    )
    ap.add_argument(
        "--concurrency", default="1,16,64", help="closed-loop streams, comma-separated ('' for none)"
    )
    ap.add_argument("--duration", type=float, default=25.0, help="seconds per run")
    ap.add_argument("--input-tokens", type=int, default=256)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--tools", default="gpuplan,guidellm", help="which tools, in run order per load")
    ap.add_argument(
        "--guidellm-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment for GuideLLM, e.g. GUIDELLM__MAX_WORKER_PROCESSES=2 (repeatable)",
    )
    ap.add_argument(
        "--guidellm-data",
        choices=("synthetic", "file"),
        default="synthetic",
        help="GuideLLM prompts: its synthetic_text generator, or a pre-written JSONL file",
    )
    ap.add_argument(
        "--quiet-load",
        type=float,
        default=0.0,
        help="before each run wait until the 1-min load average is below this (0: never wait)",
    )
    ap.add_argument("--quiet-wait", type=float, default=300.0, help="longest such wait, s")
    ap.add_argument("--workdir", type=Path, help="logs, reports and the tokenizer (default: a temp dir)")
    ap.add_argument("--json-out", type=Path, help="also write every row as JSON here")
    return ap.parse_args()


def loads(args: argparse.Namespace) -> list[Load]:
    """The load points, open loop first."""
    rates = [Load("rate", float(x)) for x in args.rates.split(",") if x.strip()]
    return rates + [Load("concurrency", float(x)) for x in args.concurrency.split(",") if x.strip()]


def report(rows: list[Row], cfg: Settings, args: argparse.Namespace) -> None:
    """Print both tables (and write the JSON rows when asked)."""
    print(f"Date: {datetime.date.today()}. {versions(cfg.peer)}")
    print(
        f"Mock: TTFT {cfg.ttft_ms:g} ms, ITL {cfg.itl_ms:g} ms; {cfg.input_tokens} prompt / "
        f"{cfg.output_tokens} output tokens; {cfg.duration:g} s per run; work dir {cfg.workdir}\n"
    )
    print("Latency (ms) and throughput, each tool's own figures:\n")
    print(table(rows, cfg, LATENCY_COLS, with_truth=True))
    print("\nClient and mock resources:\n")
    print(table(rows, cfg, RESOURCE_COLS, with_truth=False))
    if args.json_out:
        args.json_out.write_text(json.dumps([asdict(r) for r in rows], indent=1))


def main() -> None:
    """Build the tokenizer, start the mock, run every (load, tool), stop the mock, print the tables."""
    args = parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cmp_guidellm_"))
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = Settings(
        url=f"http://127.0.0.1:{args.port}",
        duration=args.duration,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        workdir=workdir.resolve(),
        peer=args.peer_venv,
        peer_env=dict(kv.split("=", 1) for kv in args.guidellm_env),
        peer_data=args.guidellm_data,
        quiet_load=args.quiet_load,
        quiet_wait_s=args.quiet_wait,
    )
    cfg.tokenizer = build_tokenizer(cfg)
    mock = Mock(args.port, args.ttft_ms, args.itl_ms, cfg.workdir / "mock.log")
    rows: list[Row] = []
    try:
        for load in loads(args):
            for tool in args.tools.split(","):
                print(f"running {tool} at {load.label} ...", file=sys.stderr, flush=True)
                rows.append(measure(tool, load, cfg, mock))
    finally:
        mock.stop()
    report(rows, cfg, args)


if __name__ == "__main__":
    main()

"""``gpuplan bench serve`` against a real engine this project did not write: ``transformers serve``
(Hugging Face's OpenAI-compatible server) on 127.0.0.1, serving a tiny Llama the test builds itself
(random weights, a BPE tokenizer trained on the synthetic prompts' words; nothing is downloaded).

What is checked against the server's own view (``engine_stopwatch.py``: transformers' server with a
stopwatch inside its process, reading the ``usage`` it sends and timing each text event as it is
handed to the transport):

- token counts: every stored request's input/output tokens equal the ``usage`` the server sent, and
  the truth (each synthetic word is one token of this tokenizer; EOS can never win the greedy argmax,
  so every answer is ``max_tokens`` long);
- TTFT: each request's client TTFT is at least its server TTFT (the client starts its clock before
  the request reaches the server and stops it after the first event leaves) and at most a few ms more;
- ITL: the client's gaps add up, per request, to the server's;
- the server's metrics scraped *during* the run (``--metrics-url``, vLLM-named histograms) read back
  through ``server_vs_client`` as the stopwatch's exact counts and means.

Needs the ``engine`` extra (``make engine``: the CPU build of torch and ``transformers[serving]``).
Without it every test here is SKIPPED with a banner; ``GPUPLAN_REQUIRE_ENGINE=1`` (set by ``.ci/run``)
turns the skip into a failure, so CI cannot pass without running them.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.bench.tokens import WORDS
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.records import RequestRecord

Invoke = Callable[..., Any]

ENGINE_MODULES = ("torch", "transformers", "fastapi", "uvicorn", "tokenizers")
MISSING = [name for name in ENGINE_MODULES if importlib.util.find_spec(name) is None]
SKIP_REASON = (
    f"REAL ENGINE NOT TESTED: {', '.join(MISSING)} not installed "
    "(make engine: the CPU torch wheel and transformers[serving])"
)
REQUIRED = os.environ.get("GPUPLAN_REQUIRE_ENGINE") == "1"
if MISSING and not REQUIRED:
    pytest.skip(SKIP_REASON, allow_module_level=True)

STOPWATCH = Path(__file__).with_name("engine_stopwatch.py")
START_TIMEOUT_S = 180.0
"""Import of torch + transformers and the model load: ~11 s on an idle 2-core machine."""
INPUT_TOKENS = 24
OUTPUT_TOKENS = 12
TTFT_MEDIAN_EXCESS_MS = 10.0
"""Most the median client TTFT may exceed the server's: the request's trip in (client send, loopback,
uvicorn's parse) plus the first event's trip out. Measured medians +1.3 to +2.4 ms (server pinned to one
core, client to the other, other work on the machine: load average 4); unpinned, up to +20 ms. A wrong
clock start (the scheduled send, a connect) would be off by whole requests."""
TTFT_MAX_EXCESS_MS = 100.0
"""Most any one request's client TTFT may exceed the server's (worst seen pinned: +12 ms; unpinned on
that loaded machine: +37 ms, a process waiting for a core)."""
CLOCK_EPS_MS = 0.05
"""How far below zero a client-minus-server excess may read: both sides stamp ``time.monotonic`` (one
system clock), the server before it hands an event over and the client after it receives it, so the
true excess is never negative; the allowance covers only the rounding of differences of two large
timestamps, far below any real excess (+1 to +2 ms median)."""


def _build_model(out: Path) -> None:
    """A 2-layer Llama with random weights and a byte-level BPE tokenizer in which each synthetic
    prompt word (``gpuplan.adapters.bench.tokens.WORDS``), with or without its leading space, is one
    token; EOS's output row is zero, so its logit (0) never wins the greedy argmax over ~400 random
    logits, and every answer runs to ``max_tokens``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<s>", "</s>"], show_progress=False)
    tok.train_from_iterator([" ".join(WORDS)] * 2 + list(WORDS), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")  # type: ignore[no-untyped-call, unused-ignore]
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    fast.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight[1].zero_()
    model.save_pretrained(out)


def _cores() -> tuple[set[int], set[int]]:
    """(server's cores, client's cores): the last core for the server and its model process, the others
    for the client (as the engine was measured against packet captures, issue 23); no split on one core."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        return set(cores), set(cores)
    return {cores[-1]}, set(cores[:-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"transformers serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if _get(url + "/health").get("status") == "ok":
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(
        f"transformers serve not healthy in {START_TIMEOUT_S:.0f} s:\n{log.read_text()[-3000:]}"
    )


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, model id) of ``transformers serve`` on 127.0.0.1, one torch thread, in its own
    process group (its model runs in a child process), stopped with the group afterwards."""
    if MISSING:  # and GPUPLAN_REQUIRE_ENGINE=1: fail, never skip
        pytest.fail(SKIP_REASON.replace("NOT TESTED", "REQUIRED (GPUPLAN_REQUIRE_ENGINE=1)"), pytrace=False)
    root = tmp_path_factory.mktemp("engine")
    model = root / "tiny-llama"
    _build_model(model)
    port, log = _free_port(), root / "serve.log"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    args = [sys.executable, str(STOPWATCH), str(model), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--device", "cpu", "--dtype", "float32", "--log-level", "warning"]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    if server := _cores()[
        0
    ]:  # at once, while it imports torch: its model process, started later, inherits it
        os.sched_setaffinity(proc.pid, server)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url, str(model)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture()
def client_cores() -> Iterator[None]:
    """This process (the client) on the cores the server does not use, for the test; restored after."""
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if before:
        os.sched_setaffinity(0, _cores()[1])
    yield
    if before:
        os.sched_setaffinity(0, before)


def _bench(invoke: Invoke, url: str, model: str, store: str, *extra: str) -> dict[str, Any]:
    run = invoke(
        "bench", "serve", "--url", url, "--model", model, "--no-ignore-eos", "--format", "json",
        "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS), "--store", store, *extra,
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    summary: dict[str, Any] = json.loads(run.stdout)
    return summary


def _server_records(url: str, since: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = _get(url + "/stopwatch")
    return sorted(records[since:], key=lambda r: r["arrival_s"])


def _text_gaps_ms(server: dict[str, Any]) -> list[float]:
    times = server["token_times_s"]
    return [(b - a) * 1e3 for a, b in itertools.pairwise(times)]


@pytest.mark.usefixtures("client_cores")
def test_one_at_a_time_each_request_agrees_with_the_server(
    engine: tuple[str, str], invoke: Invoke, tmp_path: Path
) -> None:
    url, model = engine
    since = len(_get(url + "/stopwatch"))
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    summary = _bench(invoke, url, model, store, "--concurrency", "1", "--num-prompts", "12")
    assert summary["requests_completed"] == 12 and not summary["errors"]
    client = sorted(Store(store).records(summary["run_id"]), key=lambda r: r.sent_s)
    server = _server_records(url, since)
    assert len(server) == len(client) == 12  # one at a time: the n-th sent is the n-th to arrive
    excess_ms = [_same_request(c, s) for c, s in zip(client, server, strict=True)]
    assert statistics.median(excess_ms) <= TTFT_MEDIAN_EXCESS_MS, excess_ms


def _same_request(c: RequestRecord, s: dict[str, Any]) -> float:
    """Check one request against the server's record; returns client TTFT − server TTFT (ms)."""
    usage = s["usage"]
    assert (c.input_tokens, c.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (INPUT_TOKENS, OUTPUT_TOKENS)
    assert c.finish_reason == s["finish_reason"] == "length"
    server_ttft_ms = (s["token_times_s"][0] - s["arrival_s"]) * 1e3
    assert c.ttft_ms is not None
    excess = c.ttft_ms - server_ttft_ms  # the client's clock brackets the server's: never negative
    assert -CLOCK_EPS_MS <= excess <= TTFT_MAX_EXCESS_MS
    gaps = _text_gaps_ms(s)
    assert len(c.itl_ms) == len(gaps)  # the same text events, one gap each
    # client last − first vs server's: differ by (delay of the last event − delay of the first), each
    # delay in [0, TTFT_MAX_EXCESS_MS]
    assert abs(sum(c.itl_ms) - sum(gaps)) <= TTFT_MAX_EXCESS_MS
    return float(excess)


@pytest.mark.usefixtures("client_cores")
def test_metrics_scraped_during_a_concurrent_chat_run_match_the_server(
    engine: tuple[str, str], invoke: Invoke, tmp_path: Path
) -> None:
    url, model = engine
    since = len(_get(url + "/stopwatch"))
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    extra = [
        "--api",
        "chat",
        "--concurrency",
        "2",
        "--num-prompts",
        "16",
        "--metrics-url",
        url + "/stopwatch/metrics",
    ]
    summary = _bench(invoke, url, model, store, *extra, "--metrics-interval-s", "0.2")
    server = _server_records(url, since)
    assert summary["requests_completed"] == len(server) == 16
    view = summary["server_vs_client"]
    ttft = view["latency_ms"]["ttft_ms"]
    exact_ttft_ms = [(s["token_times_s"][0] - s["arrival_s"]) * 1e3 for s in server]
    assert ttft["server"]["count"] == 16
    assert ttft["server"]["mean"] == pytest.approx(sum(exact_ttft_ms) / 16, rel=1e-9)
    gaps = [g for s in server for g in _text_gaps_ms(s)]
    assert view["latency_ms"]["itl_ms"]["server"]["count"] == len(gaps)
    assert view["counters"]["prompt_tokens"] == {
        "server": 16 * INPUT_TOKENS,
        "client": 16 * INPUT_TOKENS,
        "source": "vllm:prompt_tokens_total",
    }
    assert view["counters"]["generation_tokens"]["server"] == view["counters"]["generation_tokens"]["client"]
    client_ttft = sorted(r.ttft_ms or 0.0 for r in Store(store).records(summary["run_id"]))
    excess = [c - s for c, s in zip(client_ttft, sorted(exact_ttft_ms), strict=True)]
    assert min(excess) >= -CLOCK_EPS_MS, excess  # c_i >= s_i paired keeps the sorted lists in order
    assert statistics.median(excess) <= TTFT_MEDIAN_EXCESS_MS, excess
    timeline = summary["server_metrics"]["timeline"]
    assert len(timeline["t_s"]) >= 3 and not timeline["errors"]  # scraped during the run, not only around it
    running = view["load"]["running"]
    assert 1 <= running["max"] <= 2

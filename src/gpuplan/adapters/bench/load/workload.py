"""What each request of a run sends: its schedule offset, prompt and ``max_tokens``.

- Synthetic (default): ``input_tokens`` words per prompt (docs/bench.md, token-count approximation),
  different per request, ``max_tokens = output_tokens``; offsets from :mod:`schedule`.
- ``trace_path``: the simulator's trace format (CSV with a header or JSON lines of ``arrival_s``,
  ``input_tokens``, ``output_tokens``; read by :func:`gpuplan.core.sim.workload.parse_trace`): request ``i``
  is sent at its ``arrival_s`` (first arrival = 0) with that many prompt words and ``max_tokens``;
  only arrivals inside ``warmup + duration`` are sent.
- ``prompts_path``: JSON lines, each a string or an object with ``prompt`` (and optionally
  ``output_tokens``/``max_tokens``); request ``i`` uses line ``i mod n``. Its token count is estimated
  (one word = one token) unless the server reports ``usage``.
- ``range_ratio`` r > 0 (``--random-range-ratio``, synthetic prompts only): request ``i``'s input and
  output lengths are drawn independently and uniformly from the whole numbers in
  ``[floor(L·(1 − r)), ceil(L·(1 + r))]`` (at least 1), as ``vllm bench serve``'s random dataset does
  (vllm/benchmarks/datasets.py, ``RandomDataset``), seeded by ``seed`` and ``i``.
- ``dataset = "sharegpt"`` (``--dataset-name sharegpt --dataset-path FILE.json``): a JSON list of
  ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}``; each
  entry with two non-empty turns gives a prompt (the first turn) with ``max_tokens`` = the second turn's
  length in words, so prompts keep their real lengths; entries are shuffled with ``seed`` and request
  ``i`` uses entry ``i mod n``.
- ``dataset = "prefix_repetition"`` (``--dataset-name prefix_repetition``, ``vllm bench serve``'s
  ``PrefixRepetitionRandomDataset``, for prefix-caching tests): ``num_prefixes`` synthetic prefixes of
  ``prefix_len`` words, each prompt one of them + a space + ``input_tokens`` fresh words (vLLM's suffix
  length), ``max_tokens = output_tokens``. Every prefix is used equally often: each block of
  ``num_prefixes`` consecutive requests uses each once, in an order shuffled by ``seed`` and the block.
  vLLM builds ``num_prompts // num_prefixes`` prompts per prefix and shuffles the list, dropping the
  remainder; here a count that is not a multiple only leaves the last block partly used.
- ``dataset = "hf"`` (``--dataset-name hf --dataset-path DIR``, vLLM's names, with ``--hf-split``,
  ``--hf-subset``, ``--hf-output-len``): a Hugging Face dataset on local disk
  (:mod:`gpuplan.adapters.bench.load.hf_dataset`), each row's prompt with its real lengths, shuffled with
  ``seed``; request ``i`` uses row ``i mod n``.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from pathlib import Path

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.hf_dataset import chat_turns, load_hf
from gpuplan.adapters.bench.load.schedule import offsets_s
from gpuplan.adapters.bench.tokens import estimate_tokens, synthetic_prompt
from gpuplan.core import jsontext
from gpuplan.core.errors import FileFormatError, UserInputError


@dataclass(frozen=True)
class Prompt:
    text: str
    output_tokens: int | None = None


@dataclass(frozen=True)
class Plan:
    """Offsets (open loop; empty in closed loop), per-request token counts (trace) and prompts (file)."""

    offsets: list[float]
    input_tokens: list[int] | None = None
    output_tokens: list[int] | None = None
    prompts: list[Prompt] | None = None
    prefixes: list[str] | None = None
    """The shared prefixes of ``prefix_repetition`` (see the module doc)."""

    def request(self, config: LoadConfig, index: int) -> tuple[str, int, int]:
        """(prompt, estimated input tokens, max_tokens) of request ``index``."""
        out = self.output_tokens[index] if self.output_tokens is not None else config.output_tokens
        if self.prompts:
            prompt = self.prompts[index % len(self.prompts)]
            return prompt.text, estimate_tokens(prompt.text), prompt.output_tokens or out
        if self.prefixes:
            return _prefixed(config, self.prefixes, index), config.prefix_len + config.input_tokens, out
        tokens = self.input_tokens[index] if self.input_tokens is not None else config.input_tokens
        if config.range_ratio > 0 and self.input_tokens is None:
            tokens, out = drawn_lengths(config, index)
        return synthetic_prompt(max(tokens, 1), config.seed * 1_000_003 + index), max(tokens, 1), out


PREFIX_SEED_BASE = 1 << 40
"""Prefix ``p`` is the synthetic prompt of seed ``PREFIX_SEED_BASE + seed * 1_000_003 + p``: above every
request's own seed (``seed * 1_000_003 + index``) for any index a run can reach, so no suffix repeats a
prefix."""


def prefixes(config: LoadConfig) -> list[str]:
    """The ``num_prefixes`` shared prefixes of a ``prefix_repetition`` run."""
    base = PREFIX_SEED_BASE + config.seed * 1_000_003
    return [synthetic_prompt(config.prefix_len, base + p) for p in range(config.num_prefixes)]


def prefix_of(config: LoadConfig, index: int) -> int:
    """Which prefix request ``index`` uses: its place in its block's shuffled order (see the module doc)."""
    block, place = divmod(index, config.num_prefixes)
    return _block_order(config.seed, config.num_prefixes, block)[place]


@functools.lru_cache(maxsize=8)
def _block_order(seed: int, count: int, block: int) -> tuple[int, ...]:
    """The shuffled prefix order of one block (cached: consecutive requests share their block)."""
    return tuple(random.Random(f"prefixes:{seed}:{block}").sample(range(count), count))


def _prefixed(config: LoadConfig, shared: list[str], index: int) -> str:
    suffix = synthetic_prompt(config.input_tokens, config.seed * 1_000_003 + index)
    return shared[prefix_of(config, index)] + " " + suffix


def drawn_lengths(config: LoadConfig, index: int) -> tuple[int, int]:
    """Request ``index``'s (input, output) tokens under ``--random-range-ratio`` (see the module doc)."""
    rng = random.Random(f"lengths:{config.seed}:{index}")
    ratio = config.range_ratio
    drawn = []
    for length in (config.input_tokens, config.output_tokens):
        low = max(math.floor(length * (1 - ratio)), 1)
        drawn.append(rng.randint(low, max(math.ceil(length * (1 + ratio)), low)))
    return drawn[0], drawn[1]


def _read(path: str, what: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def load_trace(path: str) -> tuple[list[float], list[int], list[int]]:
    """(arrival_s, input_tokens, output_tokens) of a trace file, sorted, first arrival at 0."""
    from gpuplan.core.sim.workload import parse_trace

    text = _read(path, "trace")
    if path.endswith((".jsonl", ".json", ".ndjson")):
        trace = parse_trace(text, origin=path, fmt="jsonl")
    else:
        trace = parse_trace(text, origin=path, fmt="csv")
    return (
        [float(t) for t in trace.arrival_s],
        [int(n) for n in trace.input_tokens],
        [int(n) for n in trace.output_tokens],
    )


def trace_span_s(path: str) -> float:
    """Seconds from the first to just after the last arrival (a trace's natural duration)."""
    arrivals = load_trace(path)[0]
    return arrivals[-1] + max(arrivals[-1] / max(len(arrivals) - 1, 1), 1e-3)


def _prompt(item: object, path: str, number: int) -> Prompt:
    if isinstance(item, str):
        return Prompt(item)
    if isinstance(item, dict) and isinstance(item.get("prompt"), str):
        out = item.get("output_tokens", item.get("max_tokens"))
        if out is not None and (not isinstance(out, int) or out < 1):
            raise FileFormatError(f"{path} line {number}: output_tokens must be a whole number >= 1")
        return Prompt(item["prompt"], out)
    raise FileFormatError(f'{path} line {number}: expected a string or an object with a "prompt" string')


def load_prompts(path: str) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(_read(path, "prompt file").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = jsontext.loads(line)
        except ValueError as exc:
            raise FileFormatError(f"{path} line {number}: not JSON ({exc})") from None
        prompts.append(_prompt(item, path, number))
    if not prompts:
        raise FileFormatError(f"{path}: no prompts", hint='one JSON line per prompt: {"prompt": "..."}')
    return prompts


def load_sharegpt(path: str, seed: int) -> list[Prompt]:
    """The prompts of a ShareGPT-format JSON file with their real output lengths (see the module doc)."""
    try:
        data = jsontext.loads(_read(path, "ShareGPT dataset"))
    except ValueError as exc:
        raise FileFormatError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise FileFormatError(f"{path}: expected a JSON list of conversations, got a {type(data).__name__}")
    turns = (chat_turns(e.get("conversations"), "from", "value") for e in data if isinstance(e, dict))
    prompts = [
        Prompt(first, estimate_tokens(second)) for first, second in turns if first.strip() and second.strip()
    ]
    if not prompts:
        raise FileFormatError(
            f"{path}: no conversation with two non-empty turns",
            hint='ShareGPT format: [{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}]',
        )
    random.Random(seed).shuffle(prompts)
    return prompts


def load_hf_dataset(config: LoadConfig) -> list[Prompt]:
    """The prompts of ``--dataset-name hf`` (see :mod:`gpuplan.adapters.bench.load.hf_dataset`)."""
    assert config.dataset_path is not None
    args = (config.hf_split, config.hf_subset, config.hf_output_len, config.output_tokens)
    return list(_hf_prompts(config.dataset_path, config.seed, *args))


@functools.lru_cache(maxsize=2)
def _hf_prompts(
    path: str, seed: int, split: str | None, subset: str | None, output_len: int | None, default_output: int
) -> tuple[Prompt, ...]:
    """Read once per process: a run builds its plan several times (the stored run's expected count,
    the load itself, each level of a sweep), and a dataset is every file of it read and counted."""
    rows = load_hf(
        path, seed=seed, split=split, subset=subset, output_len=output_len, default_output=default_output
    )
    return tuple(Prompt(text, out) for text, out in rows)


def build(config: LoadConfig) -> Plan:
    """The plan of ``config`` (reads the trace and prompt files it names)."""
    prompts = load_prompts(config.prompts_path) if config.prompts_path else None
    if config.dataset_path is not None and config.dataset == "hf":
        prompts = load_hf_dataset(config)
    elif config.dataset_path is not None:
        prompts = load_sharegpt(config.dataset_path, config.seed)
    shared = prefixes(config) if config.dataset == "prefix_repetition" else None
    if config.trace_path is None:
        return Plan(offsets_s(config) if config.open_loop else [], prompts=prompts, prefixes=shared)
    arrivals, inputs, outputs = load_trace(config.trace_path)
    window = config.warmup_s + config.duration_s
    count = min(sum(t < window for t in arrivals), config.max_requests)
    return Plan(arrivals[:count], inputs[:count], outputs[:count], prompts)

"""Engine settings a load-sweep row states in its notes, as the simulator's knobs.

A sweep row carries its server's launch command and how its benchmark was run. Two things in them
change what the run measured and are read here, never guessed per row:

* **Launch limits.** ``--max_num_tokens 16384 --max_batch_size 512`` (TensorRT-LLM), vLLM's
  ``--max-num-batched-tokens`` / ``--max-num-seqs`` and SGLang's ``--chunked-prefill-size`` /
  ``--max-running-requests`` replace the engine's defaults: they decide how many prompts share a step
  and so how long the decodes in it wait.
* **Replayed prompts with prefix caching on.** When one server ran every load level on the same prompt
  sample in turn with prefix caching on (the notes say so and name the first level), every level after
  the first finds its prompts' KV already cached, as far as the KV pool holds the whole sample. The
  engine caches whole pages only and always computes a prompt's last token, so a prompt of L tokens
  computes ``L − ⌊(L − 1)/page⌋·page`` of them (vLLM's block hashing: ``KVCacheManager`` matches full
  blocks of the prompt, https://docs.vllm.ai/en/latest/design/prefix_caching.html). The measured A100
  sweep shows it: at QPS 1 (cold) TTFT grows from 45 ms for prompts under 50 tokens to 120 ms above
  500; at QPS 4 and 16 it is flat, 48–61 ms, at every prompt length.
"""

from __future__ import annotations

import re

from gpuplan.core.sim.workload import LengthDist
from gpuplan.usecases.validation.cases import Case

_LIMIT_FLAGS: dict[str, tuple[str, ...]] = {
    "max_batched_tokens": ("max_num_tokens", "max-num-batched-tokens", "chunked-prefill-size"),
    "max_num_seqs": ("max_batch_size", "max-num-seqs", "max-running-requests"),
}
"""Simulator knob → the launch flags that set it (TensorRT-LLM, vLLM, SGLang spellings)."""
HELD_TOKEN_SHARES: dict[str, float] = {"trtllm-0.x": 0.055}
"""Share of generated tokens a release line's OpenAI server streams with no text.

trtllm-0.x: ``TransformersTokenizer.decode_incrementally`` (``tensorrt_llm/llmapi/tokenizer.py``, adapted
from vLLM 0.6.3's detokenizer) returns no new text while ``len(curr.rstrip()) <= len(last.rstrip())``
or the text ends in U+FFFD, so every token that only adds whitespace (``\n\n``, indentation) is held
until the next one; vLLM 0.6.3 compares the unstripped lengths and holds only split characters. The
client of the dstack DeepSeek-R1 sweep (its ``bench_serving.py``, ``if data["choices"][0]["text"]:``)
skips empty chunks. The share is measured on that sweep's raw file (``mean_itl_ms`` / ``mean_tpot_ms``
of trt-llm at concurrency 4…128 = 1.056–1.060 with fixed 800-token answers, so 799 gaps arrived as
754–757 chunks: 5.3–5.7 % of tokens held; vLLM 1.003–1.006, SGLang 1.000):
https://github.com/dstackai/benchmarks/blob/7f37e6697725e58dd09b9ef190b62ce19f01d45e/Deepseek-R1/raw_data/online_results.csv.
It depends on the answer's text (DeepSeek-R1 reasoning on random prompts); any share above 1 % puts
the ITL P99 on two-step gaps."""
_ONE_GAP_PER_CHUNK = "one gap per chunk"
_CACHING = re.compile(r"--enable-prefix-caching|prefix caching (?:was )?on")
_FIRST_LEVEL = re.compile(r"replayed.*?after the first(?: rate)? \((?:QPS )?([0-9.]+)")


def launch_limits(case: Case) -> dict[str, int]:
    """The simulator knobs (``SimConfig`` field → value) the row's launch command sets."""
    notes = case.get("notes")
    limits: dict[str, int] = {}
    for knob, flags in _LIMIT_FLAGS.items():
        for flag in flags:
            found = re.search(rf"--{re.escape(flag)}[ =]([0-9]+)\b", notes)
            if found:
                limits[knob] = int(found.group(1))
                break
    return limits


def held_token_share(case: Case, line: str | None) -> float:
    """Share of tokens whose gap the row's client joins to the next one: the release line ``line``'s
    (``HELD_TOKEN_SHARES``) where the notes say the client counts one gap per chunk, else 0."""
    if line is None or _ONE_GAP_PER_CHUNK not in case.get("notes"):
        return 0.0
    return HELD_TOKEN_SHARES.get(line, 0.0)


def replayed_after_first_level(case: Case) -> bool:
    """Whether the row's prompts were already served once by the same server with prefix caching on:
    its notes say the sample was replayed at every level, and its own load is above the first level's."""
    notes = case.get("notes")
    first = _FIRST_LEVEL.search(notes)
    load = case.float_field("request_rate") or case.float_field("concurrency")
    return (
        bool(_CACHING.search(notes))
        and first is not None
        and load is not None
        and load > float(first.group(1))
    )


def cached_prompt_share(prompts: LengthDist, page_tokens: int) -> float:
    """Share of the prompts' tokens found in the cache when every prompt was seen before: whole pages of
    each prompt but its last token."""
    lengths = prompts.values or (prompts.value or 1,)
    cached = sum((length - 1) // page_tokens * page_tokens for length in lengths)
    return cached / sum(lengths)


def sample_fits_pool(prompts: LengthDist, num_prompts: int, kv_tokens: float) -> bool:
    """Whether the KV pool holds every prompt of the replayed sample (else least-recently-used pages of
    the previous level are evicted before they are reused, and the sample is not assumed cached)."""
    return prompts.mean_tokens * num_prompts <= kv_tokens

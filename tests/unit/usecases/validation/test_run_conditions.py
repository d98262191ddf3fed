"""Engine settings a sweep row states in its notes: launch limits, and prompts replayed with caching."""

from __future__ import annotations

import pytest
from validation_row_factory import llama8b_row

from gpuplan.core.sim.workload import LengthDist
from gpuplan.usecases.validation.run_conditions import (
    HELD_TOKEN_SHARES,
    cached_prompt_share,
    held_token_share,
    launch_limits,
    replayed_after_first_level,
    sample_fits_pool,
)

_TRT = (
    "launch: trtllm-serve --backend pytorch --max_batch_size 512 --max_num_tokens 16384 --max_seq_len 16384 "
    "--tp_size 8 --ep_size 4"
)
_REPLAY = (
    "launch: vllm serve M --enable-prefix-caching | quality C: prefix caching on and the same 200 prompts "
    "replayed at QPS 1, 4, 16 on one server, so TTFT after the first (QPS 1) run may include prefix-cache hits"
)


def test_launch_flags_of_each_engine_become_the_simulated_limits() -> None:
    assert launch_limits(llama8b_row("ttft_ms_p50", notes=_TRT)) == {
        "max_batched_tokens": 16384,
        "max_num_seqs": 512,
    }
    vllm = "launch: vllm serve M --max-num-batched-tokens=4096 --max-num-seqs 64"
    assert launch_limits(llama8b_row("ttft_ms_p50", notes=vllm)) == {
        "max_batched_tokens": 4096,
        "max_num_seqs": 64,
    }
    sglang = "launch: python -m sglang.launch_server --chunked-prefill-size 8192 --max-running-requests 48"
    assert launch_limits(llama8b_row("ttft_ms_p50", notes=sglang)) == {
        "max_batched_tokens": 8192,
        "max_num_seqs": 48,
    }


def test_a_setting_reported_in_prose_is_not_a_launch_flag() -> None:
    # "the phase-1 report lists this baseline as ... max-num-seqs 1024": a later report's wording, not
    # the command the row ran with
    prose = (
        "the repo's later phase-1 report lists this baseline as gpu-memory-utilization 0.9, max-num-seqs 1024"
    )
    assert launch_limits(llama8b_row("ttft_ms_p50", notes=prose)) == {}


@pytest.mark.parametrize(("rate", "cached"), [("1", False), ("4", True), ("16", True)])
def test_only_levels_after_the_first_find_the_replayed_prompts_cached(rate: str, cached: bool) -> None:
    row = llama8b_row("ttft_ms_p50", scenario="rate", request_rate=rate, notes=_REPLAY)
    assert replayed_after_first_level(row) is cached


def test_the_h200_sweeps_wording_names_its_first_rate() -> None:
    notes = (
        "prefix caching was on and the same 300-prompt sample was replayed at every rate on one server, so "
        "TTFT after the first rate (0.5 req/s, cold cache) may include prefix-cache hits"
    )
    first = llama8b_row("ttft_ms_p50", scenario="rate", request_rate="0.5", notes=notes)
    later = llama8b_row("ttft_ms_p50", scenario="rate", request_rate="0.75", notes=notes)
    assert (replayed_after_first_level(first), replayed_after_first_level(later)) == (False, True)


def test_replay_without_prefix_caching_caches_nothing() -> None:
    notes = _REPLAY.replace("--enable-prefix-caching", "").replace("prefix caching on and ", "")
    row = llama8b_row("ttft_ms_p50", scenario="rate", request_rate="4", notes=notes)
    assert not replayed_after_first_level(row)


def test_cached_share_counts_whole_pages_and_never_the_last_token() -> None:
    # 16 tokens: the last is computed, so its only page is not full before it -> 0 cached;
    # 17 tokens: one full page of 16; 33: two pages of 16 (32). 48 of 66 tokens.
    prompts = LengthDist(kind="empirical", values=(16, 17, 33))
    assert cached_prompt_share(prompts, page_tokens=16) == pytest.approx(48 / 66)
    assert cached_prompt_share(LengthDist(kind="fixed", value=8), page_tokens=16) == 0.0


def test_the_sample_is_cached_only_if_the_pool_holds_it() -> None:
    prompts = LengthDist(kind="fixed", value=200)
    assert sample_fits_pool(prompts, 300, kv_tokens=60_000)
    assert not sample_fits_pool(prompts, 300, kv_tokens=59_999)


_CHUNK_CLIENT = "ITL = gaps between streamed chunks pooled over all requests; one gap per chunk"


def test_held_tokens_join_gaps_only_for_a_holding_line_and_a_per_chunk_client() -> None:
    per_chunk = llama8b_row("itl_ms_p99", notes=f"{_TRT} | {_CHUNK_CLIENT}")
    assert held_token_share(per_chunk, "trtllm-0.x") == HELD_TOKEN_SHARES["trtllm-0.x"]
    assert held_token_share(per_chunk, "vllm-v0") == 0.0  # holds only split characters
    assert held_token_share(per_chunk, None) == 0.0  # no version named: no line
    per_token = llama8b_row("itl_ms_p99", notes=f"{_TRT} | client splits a k-token chunk into k gaps")
    assert held_token_share(per_token, "trtllm-0.x") == 0.0

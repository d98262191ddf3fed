"""The JSON keys of a run summary and of the SLO search stay as documented (docs/bench.md) while the
attributes carry their unit (``*_rate_rps``), and a summary stored under those keys loads back."""

from __future__ import annotations

from pathlib import Path

from gpuplan.adapters.bench.load import search
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary, summarise
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.sla import Sla

SUMMARY_KEYS = [
    "run_id",
    "mode",
    "target_rate",
    "concurrency",
    "duration_s",
    "requests_sent",
    "requests_completed",
    "requests_failed",
    "warmup_excluded",
    "achieved_rate",
    "ttft_ms",
    "e2e_ms",
    "ttft_from_schedule_ms",
    "e2e_from_schedule_ms",
    "tpot_ms",
    "itl_ms",
    "input_tokens_mean",
    "output_tokens_mean",
    "output_tokens_per_s",
    "goodput_rps",
    "errors",
    "client",
    "server_metrics",
    "server_vs_client",
    "finish_reasons",
    "stopped_early",
    "selected_percentiles",
    "deployment",
    "warnings",
]
"""``bench serve --format json`` and the stored summary, in order (the keys before the rename)."""


def _config(rate_rps: float) -> LoadConfig:
    return LoadConfig.model_validate(
        {
            "url": "http://127.0.0.1:1",
            "model": "m",
            "rate_rps": rate_rps,
            "duration_s": 1.0,
            "input_tokens": 16,
            "output_tokens": 8,
        }
    )


def _summary(rate_rps: float) -> BenchSummary:
    records = [
        RequestRecord(
            index=i,
            scheduled_s=i * 0.1,
            sent_s=i * 0.1,
            done_s=i * 0.1 + 0.05,
            ttft_ms=20.0,
            ttft_sched_ms=20.0,
        )
        for i in range(5)
    ]
    return summarise("run-a", _config(rate_rps), records)


def test_summary_json_keeps_its_keys_and_the_attributes_have_units() -> None:
    s = _summary(4.0)
    assert (s.target_rate_rps, s.achieved_rate_rps) == (4.0, 5.0)
    dumped = s.model_dump(mode="json")
    assert list(dumped) == SUMMARY_KEYS
    assert (dumped["target_rate"], dumped["achieved_rate"]) == (4.0, 5.0)
    assert list(s.model_dump()) == SUMMARY_KEYS  # python mode too: every dump is the JSON contract
    assert '"achieved_rate":5.0' in s.model_dump_json()


def test_summary_stored_under_the_json_keys_loads_back(tmp_path: Path) -> None:
    stored = _summary(4.0).model_dump(mode="json")
    store = Store(f"sqlite:///{tmp_path / 'r.sqlite'}")
    store.create_run("run-a", "serve", {"rate_rps": 4.0}, {}, "0")
    store.finish_run("run-a", "completed", stored)
    read = store.run("run-a").summary
    assert read is not None and read["achieved_rate"] == 5.0 and "achieved_rate_rps" not in read
    loaded = BenchSummary.model_validate(read)
    assert (loaded.target_rate_rps, loaded.achieved_rate_rps) == (4.0, 5.0)
    assert loaded.model_dump(mode="json") == stored
    by_name = stored | {"target_rate_rps": 8.0, "achieved_rate_rps": 7.5}
    del by_name["target_rate"], by_name["achieved_rate"]
    assert BenchSummary.model_validate(by_name).achieved_rate_rps == 7.5


def test_slo_search_json_keeps_its_keys() -> None:
    def run(cfg: LoadConfig) -> BenchSummary:
        assert cfg.rate_rps is not None
        s = _summary(cfg.rate_rps)
        return s.model_copy(update={"achieved_rate_rps": cfg.rate_rps})

    result = search.max_rate_under_slo(
        _config(5.0), run, start_rps=5.0, sla=Sla(ttft_p99_ms=100.0), max_steps=2
    )
    assert result.max_rate_under_slo_rps == 10.0
    dumped = result.model_dump(mode="json")
    assert list(dumped) == ["max_rate_under_slo", "slo_ttft_p99_ms", "slo_tpot_p99_ms", "steps"]
    assert (dumped["max_rate_under_slo"], dumped["slo_ttft_p99_ms"], dumped["slo_tpot_p99_ms"]) == (
        10.0,
        100.0,
        None,
    )
    step_keys = [
        "rate_rps",
        "passed",
        "run_id",
        "achieved_rate",
        "ttft_p99_ms",
        "tpot_p99_ms",
        "failed_share",
    ]
    assert [list(step) for step in dumped["steps"]] == [step_keys, step_keys]
    assert search.SloSearch.model_validate(dumped) == result

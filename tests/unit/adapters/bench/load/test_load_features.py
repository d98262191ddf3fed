"""Trace and prompt files, the SLO search, Prometheus parsing and run comparison (no network)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.bench.load import metrics, search
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary, summarise
from gpuplan.adapters.bench.load.workload import build, load_prompts, trace_span_s
from gpuplan.adapters.store.compare import compare
from gpuplan.adapters.store.database import RunInfo
from gpuplan.core.errors import FileFormatError
from gpuplan.core.sla import Sla


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "url": "http://127.0.0.1:1",
        "model": "m",
        "duration_s": 10.0,
        "input_tokens": 16,
        "output_tokens": 8,
    }
    return LoadConfig.model_validate(base | kw)


def test_trace_replay_uses_arrivals_and_token_counts(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n5,10,4\n5.5,20,6\n20,5,3\n", encoding="utf-8")
    plan = build(_config(trace_path=str(trace), duration_s=10.0))
    assert plan.offsets == [0.0, 0.5]  # sorted, first arrival at 0, the one at 15 s is past the window
    cfg = _config(trace_path=str(trace))
    prompt, n_in, n_out = plan.request(cfg, 1)
    assert (len(prompt.split()), n_in, n_out) == (20, 20, 6)
    assert cfg.mode == "trace" and cfg.open_loop
    assert trace_span_s(str(trace)) == pytest.approx(15.0 + 7.5)


def test_jsonl_trace_and_prompt_file(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival_s": 0, "input_tokens": 3, "output_tokens": 2}\n', encoding="utf-8")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "a b c d", "max_tokens": 5}\n\n"two words"\n', encoding="utf-8")
    plan = build(_config(trace_path=str(trace), prompts_path=str(prompts)))
    assert plan.request(_config(rate_rps=1.0), 0) == ("a b c d", 4, 5)
    plain = build(_config(rate_rps=1.0, prompts_path=str(prompts)))
    assert plain.request(_config(rate_rps=1.0), 3) == ("two words", 2, 8)
    prompts.write_text('{"text": 1}\n', encoding="utf-8")
    with pytest.raises(FileFormatError, match="line 1"):
        load_prompts(str(prompts))


def _summary(rate: float, ttft_p99: float) -> BenchSummary:
    s = summarise("r", _config(rate_rps=rate, duration_s=1.0), [])
    return s.model_copy(
        update={
            "achieved_rate_rps": rate,
            "requests_sent": 10,
            "requests_completed": 10,
            "ttft_from_schedule_ms": s.ttft_ms.model_copy(update={"p99": ttft_p99}),
        }
    )


def test_max_rate_under_slo_doubles_then_bisects() -> None:
    tried: list[float] = []

    def fake(cfg: LoadConfig) -> BenchSummary:  # TTFT p99 grows past 100 ms above 300 req/s
        assert cfg.rate_rps is not None
        tried.append(cfg.rate_rps)
        return _summary(cfg.rate_rps, 50.0 if cfg.rate_rps <= 300 else 500.0)

    result = search.max_rate_under_slo(
        _config(rate_rps=100.0), fake, start_rps=100.0, sla=Sla(ttft_p99_ms=100.0), max_steps=8
    )
    assert tried[:3] == [100.0, 200.0, 400.0] and tried[3] == 300.0
    assert result.max_rate_under_slo_rps is not None and 280.0 <= result.max_rate_under_slo_rps <= 300.0
    assert len(result.steps) <= 8 and not result.steps[2].passed
    with pytest.raises(ValueError, match=r"; got none$"):
        search.max_rate_under_slo(_config(rate_rps=1.0), fake, start_rps=1.0, sla=Sla())
    with pytest.raises(ValueError, match=r"; got ttft_ms, ttft_p99_ms$"):  # a mean it does not measure
        search.max_rate_under_slo(
            _config(rate_rps=1.0), fake, start_rps=1.0, sla=Sla(ttft_ms=5.0, ttft_p99_ms=100.0)
        )


def test_sweep_runs_each_rate() -> None:
    out = search.sweep(_config(concurrency=2), [10, 20], lambda c: _summary(c.rate_rps or 0.0, 1.0))
    assert [s.achieved_rate_rps for s in out] == [10.0, 20.0]


def test_prometheus_parse_keeps_engine_metrics_and_their_buckets() -> None:
    text = (
        '# HELP x\nvllm:num_requests_running{model_name="m"} 3\nvllm:e2e_bucket{le="1"} 4\n'
        'vllm:e2e_count{model_name="m"} 9 1700000000\nsglang:gen_throughput 12.5\nprocess_cpu 1\n'
        "vllm:bad NaN\n"
    )
    assert metrics.parse(text) == {
        'vllm:num_requests_running{model_name="m"}': 3.0,
        'vllm:e2e_bucket{le="1"}': 4.0,
        'vllm:e2e_count{model_name="m"}': 9.0,
        "sglang:gen_throughput": 12.5,
    }
    delta = metrics.compare({"samples": {"a": 1.0}}, {"samples": {"a": 4.0, "b": 1.0}})["delta"]
    assert delta == {"a": 3.0}
    assert "error" in metrics.scrape("http://127.0.0.1:9/metrics", timeout_s=1.0)


def _info(run_id: str, summary: dict[str, Any], rate: float) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        kind="serve",
        status="completed",
        created_at=datetime.now(UTC),
        finished_at=None,
        tool_version="0",
        config={"rate_rps": rate, "model": "m"},
        conditions={},
        summary=summary,
    )


def test_compare_reports_change_and_config_diff() -> None:
    a = _info("a", {"achieved_rate": 10.0, "ttft_ms": {"mean": 50.0, "p99": 60.0}}, 10.0)
    b = _info("b", {"achieved_rate": 20.0, "ttft_ms": {"mean": 55.0, "p99": None}}, 20.0)
    out = compare(a, b)
    rows = {m["metric"]: m for m in out["metrics"]}
    assert rows["achieved_rate"]["delta_pct"] == pytest.approx(100.0)
    assert rows["ttft_ms.mean"]["delta"] == pytest.approx(5.0)
    assert rows["ttft_ms.p99"]["delta"] is None
    assert out["config_diff"] == {"rate_rps": [10.0, 20.0]}

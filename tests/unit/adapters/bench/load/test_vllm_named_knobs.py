"""The knobs named as ``vllm bench serve`` names them: the prefix_repetition workload, --percentile-metrics
with --metric-percentiles, --goodput with an E2E limit, --label/--metadata (values from first principles)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.bench.load import flags
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import summarise
from gpuplan.adapters.bench.load.workload import build
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import UserInputError


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "url": "http://127.0.0.1:1",
        "model": "m",
        "rate_rps": 10.0,
        "duration_s": 10.0,
    }
    return LoadConfig.model_validate(base | {"input_tokens": 7, "output_tokens": 3} | kw)


def test_prefix_repetition_shares_each_prefix_equally_with_fresh_suffixes() -> None:
    config = _config(dataset="prefix_repetition", prefix_len=20, num_prefixes=4)
    plan = build(config)
    requests = [plan.request(config, i) for i in range(40)]
    words = [prompt.split() for prompt, _, _ in requests]
    prefixes = [" ".join(w[:20]) for w in words]
    assert len(set(prefixes)) == 4
    for block in range(10):  # every block of num_prefixes requests uses each prefix once
        assert len(set(prefixes[4 * block : 4 * block + 4])) == 4
    assert {len(w) for w in words} == {27} and {n for _, n, _ in requests} == {27}
    assert len({" ".join(w[20:]) for w in words}) == 40  # every suffix its own
    assert {out for _, _, out in requests} == {3}
    orders = [tuple(prefixes[4 * b : 4 * b + 4]) for b in range(10)]
    assert len(set(orders)) > 1  # the order is shuffled per block, not one fixed cycle


def test_prefix_repetition_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    a, b = _config(dataset="prefix_repetition"), _config(dataset="prefix_repetition", seed=1)
    assert build(a).request(a, 5) == build(a).request(a, 5)
    assert build(a).request(a, 5)[0] != build(b).request(b, 5)[0]


def _records(e2e_sched_ms: list[float]) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i, scheduled_s=i / 10, sent_s=i / 10, done_s=i / 10 + 0.1, ttft_ms=float(i + 1),
            ttft_sched_ms=float(i + 1), e2e_ms=e2e, e2e_sched_ms=e2e, tpot_ms=1.0, output_tokens=3,
        )
        for i, e2e in enumerate(e2e_sched_ms)
    ]  # fmt: skip


def test_selected_percentiles_are_numpys_linear_ones_under_vllms_names() -> None:
    config = _config(percentile_metrics=("ttft", "e2el"), metric_percentiles=(50, 90, 99.9))
    s = summarise("r", config, _records([100.0] * 100))  # TTFT 1..100 ms
    # linear interpolation over 1..100: the q-th percentile is 1 + 99 q / 100
    assert s.selected_percentiles["ttft_ms"] == pytest.approx({"p50": 50.5, "p90": 90.1, "p99.9": 99.901})
    assert s.selected_percentiles["e2e_ms"] == {"p50": 100.0, "p90": 100.0, "p99.9": 100.0}
    assert list(s.selected_percentiles) == ["ttft_ms", "e2e_ms"]
    assert summarise("r", _config(), []).selected_percentiles == {
        "ttft_ms": {"p99": None}, "tpot_ms": {"p99": None}, "itl_ms": {"p99": None}
    }  # fmt: skip


def test_goodput_counts_only_requests_within_the_e2e_limit() -> None:
    records = _records([50.0, 150.0, 250.0, 90.0])
    window_s = 10.0  # the run's duration: a rate run's measurement window
    assert summarise("r", _config(slo_e2el_ms=100.0), records).goodput_rps == 2 / window_s
    assert summarise("r", _config(slo_e2el_ms=100.0, slo_ttft_ms=1.5), records).goodput_rps == 1 / window_s
    assert summarise("r", _config(), records).goodput_rps is None


def test_goodput_flag_reads_vllms_pairs_and_refuses_others() -> None:
    assert flags.goodput(["ttft:500 tpot:50", "e2el:2000"]) == {
        "slo_ttft_ms": 500.0, "slo_tpot_ms": 50.0, "slo_e2el_ms": 2000.0
    }  # fmt: skip
    for bad in ("ttft", "queue:5", "e2el:-1", "tpot:nan"):
        with pytest.raises(UserInputError, match="--goodput"):
            flags.goodput([bad])


def test_metadata_and_label_are_kept_on_the_config() -> None:
    pairs = flags.metadata(["tp=2", "note=a=b", "tp=4"])
    assert pairs == {"tp": "4", "note": "a=b"}
    with pytest.raises(UserInputError, match="--metadata"):
        flags.metadata(["novalue"])
    dumped = _config(label="baseline", metadata=pairs).model_dump(mode="json")
    assert (dumped["label"], dumped["metadata"]) == ("baseline", {"tp": "4", "note": "a=b"})


def test_prefix_repetition_refuses_files_and_percentiles_must_be_in_range() -> None:
    with pytest.raises(ValueError, match="prefix_repetition builds its own prompts"):
        _config(dataset="prefix_repetition", prompts_path="p.jsonl")
    with pytest.raises(ValueError, match="--metric-percentiles"):
        _config(metric_percentiles=(0.0,))

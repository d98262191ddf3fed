"""Speculative decoding and prefix caching from the command line and from scenario files: predict,
simulate and recommend read them, and bad values are one line naming the flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN_INPUTS = Path(__file__).resolve().parents[1] / "golden" / "json" / "inputs"
TINY_8B = ("recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "10", "--output-tokens", "10")
PREDICT = GOLDEN_INPUTS / "predict-rate.yaml"
"""Llama-3.1-8B fp8 on 2 x H100, 8 req/s of 2,048 / 256 tokens."""


def _predict(invoke: Any, *flags: str, path: Path = PREDICT) -> dict[str, Any]:
    run = invoke("predict", str(path), "-f", "json", *flags)
    assert run.exit_code == 0, run.stderr
    prediction: dict[str, Any] = json.loads(run.stdout)["prediction"]
    return prediction


def test_predict_reads_the_flags(invoke: Any) -> None:
    plain = _predict(invoke)
    eagle = _predict(invoke, "--spec-method", "eagle")
    draft = _predict(
        invoke, "--spec-method", "draft", "--draft-model", "meta-llama/Llama-3.2-1B", "--spec-tokens", "3"
    )
    warm = _predict(invoke, "--prefix-hit-rate", "0.5")
    assert eagle["tpot_s"] < 0.6 * plain["tpot_s"]
    assert draft["tpot_s"] < plain["tpot_s"]
    assert draft["memory"]["weights_bytes"] > plain["memory"]["weights_bytes"]  # the draft's weights
    assert warm["ttft_s"] < 0.7 * plain["ttft_s"]
    assert warm["memory"] == plain["memory"]


def test_a_scenario_file_takes_the_same_sections(invoke: Any, tmp_path: Path) -> None:
    doc = tmp_path / "spec.yaml"
    doc.write_text(
        PREDICT.read_text(encoding="utf-8").replace(
            "rate_rps: 8}", "rate_rps: 8, prefix_cache_hit_rate: 0.5}\nspeculative: {method: eagle}"
        ),
        encoding="utf-8",
    )
    from_file = _predict(invoke, path=doc)
    from_flags = _predict(invoke, "--spec-method", "eagle", "--prefix-hit-rate", "0.5")
    assert from_file == from_flags


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--spec-method", "eagle", "--spec-acceptance", "1.5"),
            "--spec-acceptance: Input should be less than 1",
        ),
        (
            ("--spec-method", "ngram", "--spec-tokens", "0"),
            "--spec-tokens: Input should be greater than or equal to 1",
        ),
        (("--spec-method", "medusa"), "--spec-method: Input should be 'draft', 'mtp', 'eagle' or 'ngram'"),
        (("--spec-tokens", "3"), "--spec-tokens needs --spec-method"),
        (("--spec-method", "draft"), "--spec-method draft needs --draft-model"),
        (("--spec-method", "mtp", "--draft-model", "meta-llama/Llama-3.2-1B"), "--draft-model goes with"),
        (("--prefix-hit-rate", "1"), "--prefix-hit-rate: Input should be less than 1"),
        (("--prefix-hit-rate", "-0.1"), "--prefix-hit-rate: Input should be greater than or equal to 0"),
    ],
)
def test_bad_values_name_the_flag(user_error: Any, flags: tuple[str, ...], message: str) -> None:
    assert message in user_error("predict", str(PREDICT), *flags)
    assert message in user_error(*TINY_8B, "--rate", "1", *flags)


def test_an_unknown_draft_model_is_a_user_error(user_error: Any) -> None:
    line = user_error("predict", str(PREDICT), "--spec-method", "draft", "--draft-model", "no-such/model-1B")
    assert "no-such/model-1B" in line


def test_a_flag_the_file_already_gives_is_refused(user_error: Any, tmp_path: Path) -> None:
    doc = tmp_path / "sim.yaml"
    doc.write_text(
        PREDICT.read_text(encoding="utf-8")
        + "simulation: {prefix_cache_hit_rate: 0.3}\nspeculative: {method: mtp}\n",
        encoding="utf-8",
    )
    assert "--prefix-hit-rate: the scenario file gives" in user_error(
        "simulate", str(doc), "--prefix-hit-rate", "0.5"
    )
    assert "--spec-method: the scenario file has a speculative" in user_error(
        "predict", str(doc), "--spec-method", "eagle"
    )


def test_workload_and_simulation_hit_rates_must_agree(user_error: Any, tmp_path: Path) -> None:
    doc = tmp_path / "both.yaml"
    text = PREDICT.read_text(encoding="utf-8").replace(
        "rate_rps: 8}", "rate_rps: 8, prefix_cache_hit_rate: 0.5}"
    )
    doc.write_text(text + "simulation: {prefix_cache_hit_rate: 0.3}\n", encoding="utf-8")
    line = user_error("predict", str(doc))
    assert "workload.prefix_cache_hit_rate (0.5) differs from simulation.prefix_cache_hit_rate (0.3)" in line


def test_recommend_refuses_the_flags_beside_a_file(user_error: Any) -> None:
    line = user_error("recommend", str(PREDICT), "--spec-method", "eagle")
    assert "--spec-method would be ignored: a scenario file" in line


def test_simulate_reads_the_flags(invoke: Any, tmp_path: Path) -> None:
    doc = tmp_path / "sim.yaml"
    doc.write_text(
        PREDICT.read_text(encoding="utf-8") + "arrival: {num_requests: 300, seed: 1}\n", encoding="utf-8"
    )

    def summary(*flags: str) -> dict[str, Any]:
        run = invoke("simulate", str(doc), "-f", "json", *flags)
        assert run.exit_code == 0, run.stderr
        result: dict[str, Any] = json.loads(run.stdout)["summary"]
        return result

    plain, eagle, warm = summary(), summary("--spec-method", "eagle"), summary("--prefix-hit-rate", "0.5")
    assert eagle["tpot"]["mean_ms"] < 0.6 * plain["tpot"]["mean_ms"]
    assert warm["ttft"]["mean_ms"] < 0.7 * plain["ttft"]["mean_ms"]


def test_recommend_reads_the_flags(invoke: Any) -> None:
    # 10 req/s of 4,096 / 512 tokens on H100s at TPOT <= 12 ms: 4 GPUs without speculation (fp8,
    # 2 x TP2), 2 with EAGLE (fp8, 2 x TP1: ~1.9x fewer ms per token).
    base = ("recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "4096", "--output-tokens", "512",
            "--rate", "10", "--ttft-ms", "2000", "--tpot-ms", "12", "--gpus", "H100-SXM", "-f", "json")  # fmt: skip
    plain, fast = invoke(*base), invoke(*base, "--spec-method", "eagle")
    assert plain.exit_code == fast.exit_code == 0, fast.stderr
    best, before = json.loads(fast.stdout)["plans"][0], json.loads(plain.stdout)["plans"][0]
    assert best["count"] < before["count"]
    assert best["tpot_ms"] < 12


def test_the_engine_release_changes_the_schedule_and_is_read_from_either_source(
    invoke: Any, tmp_path: Path
) -> None:
    # vLLM 0.14 runs at its release line's factors and plans each step during the previous one, so
    # its step overhead is hidden: faster decode steps than the engine's own (older) factors give
    plain, v014 = _predict(invoke), _predict(invoke, "--engine-version", "0.14.1")
    assert v014["tpot_s"] < plain["tpot_s"]
    doc = tmp_path / "v014.yaml"
    doc.write_text(PREDICT.read_text(encoding="utf-8") + "engine_version: 0.14.1\n", encoding="utf-8")
    assert _predict(invoke, path=doc) == v014


def test_recommend_sizes_and_records_the_engine_release(invoke: Any) -> None:
    run = invoke(*TINY_8B, "--rate", "1", "--gpus", "H100-SXM", "--engine-version", "0.14.1", "-f", "json")
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["plans"][0]["engine_version"] == "0.14.1"


@pytest.mark.parametrize("command", ["predict", "recommend"])
def test_a_release_that_is_not_a_version_names_the_flag(user_error: Any, command: str) -> None:
    head = ("predict", str(PREDICT)) if command == "predict" else (*TINY_8B, "--rate", "1")
    line = user_error(*head, "--engine-version", "latest")
    assert "--engine-version" in line and "'latest' is not an engine version" in line


def test_an_engine_release_in_the_file_and_on_the_line_is_refused(user_error: Any, tmp_path: Path) -> None:
    doc = tmp_path / "v.yaml"
    doc.write_text(PREDICT.read_text(encoding="utf-8") + "engine_version: 0.8.3\n", encoding="utf-8")
    assert "--engine-version: the scenario file gives engine_version" in user_error(
        "predict", str(doc), "--engine-version", "0.14.1"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(PREDICT.read_text(encoding="utf-8") + "engine_version: newest\n", encoding="utf-8")
    line = user_error("predict", str(bad))
    assert "engine_version" in line and "'newest' is not an engine version" in line


@pytest.mark.parametrize(
    ("version", "message"),
    [("1.", "'1.' is not an engine version"), ("99999.1", "'99999.1' is not an engine version")],
)
def test_a_version_no_release_line_holds_is_refused(user_error: Any, version: str, message: str) -> None:
    assert message in user_error("predict", str(PREDICT), "--engine-version", version)


def test_a_plan_file_with_a_bad_release_is_refused(user_error: Any, invoke: Any, tmp_path: Path) -> None:
    run = invoke(*TINY_8B, "--rate", "1", "--gpus", "H100-SXM", "-f", "json")
    assert run.exit_code == 0, run.stderr
    plan = json.loads(run.stdout)
    plan["plans"][0]["engine_version"] = "garbage"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    assert "'garbage' is not an engine version" in user_error("tco", str(path), "--load-growth", "2")

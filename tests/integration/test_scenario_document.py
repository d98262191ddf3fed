"""One scenario document for ``gpuplan predict`` and ``gpuplan simulate``: the same file runs through
both commands (new shape, with an ``arrival:`` section, and the older simulate shape), they agree
where first principles say they must, and bad input is one line naming the field."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]
UserError = Callable[..., str]

LIGHT = """\
model: meta-llama/Llama-3.1-8B
hardware: {gpu: H100-SXM, count: 1}
workload: {scenario: rate, input_tokens: 512, output_tokens: 64, rate_rps: 0.2}
sla: {ttft_ms: 1000, tpot_ms: 50, ttft_p99_ms: 2000}
"""
WITH_ARRIVAL = """\
model: meta-llama/Llama-3.1-8B
hardware: {gpu: H100-SXM, count: 2}
workload: {scenario: rate, rate_rps: 4}
arrival:
  kind: gamma
  cv: 2
  input_tokens: {kind: lognormal, mean: 800, std: 300}
  output_tokens: {kind: uniform, low: 20, high: 200}
  num_requests: 300
  seed: 3
sla: {ttft_p99_ms: 1000, tpot_p99_ms: 60}
"""
OLD_SIMULATE = """\
model: meta-llama/Llama-3.1-8B
hardware: {gpu: H100-SXM, count: 2}
workload:
  arrival: {kind: gamma, rate_rps: 4, cv: 2}
  input_tokens: {kind: lognormal, mean: 800, std: 300}
  output_tokens: {kind: uniform, low: 20, high: 200}
  num_requests: 300
  seed: 3
slo: {ttft_p99_ms: 1000, tpot_p99_ms: 60}
"""
# Light load: at 0.2 req/s and an E2E of ~0.65 s an arrival finds the engine busy with probability
# ~ lambda * W ~ 13 %, and then its prefill shares a step with one decode (<= one ~10 ms decode step
# more): the mean TTFT moves by <= 0.13 * 10 ms ~ 1.3 ms of ~23 ms (6 %); a decode step of two
# sequences instead of one is memory bound (weights dominate), a few per cent at most on TPOT.
LIGHT_TTFT_TOLERANCE = 0.10
LIGHT_TPOT_TOLERANCE = 0.05


def _write(tmp_path: Path, text: str, name: str = "sc.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _both(invoke: Invoke, path: Path) -> tuple[dict[str, Any], dict[str, Any], Any]:
    predicted = invoke("predict", str(path), "--format", "json")
    simulated = invoke("simulate", str(path), "--format", "json")
    assert predicted.exit_code == 0, predicted.output
    assert simulated.exit_code == 0, simulated.output
    return json.loads(predicted.stdout), json.loads(simulated.stdout), simulated


def test_same_file_both_commands_agree_at_light_load(invoke: Invoke, tmp_path: Path) -> None:
    predicted, simulated, _ = _both(invoke, _write(tmp_path, LIGHT))
    pred, summary = predicted["prediction"], simulated["summary"]
    assert summary["requests"] == 1000  # DEFAULT_NUM_REQUESTS: no arrival section, the derived traffic
    assert summary["ttft"]["mean_ms"] == pytest.approx(pred["ttft_s"] * 1000, rel=LIGHT_TTFT_TOLERANCE)
    assert summary["tpot"]["mean_ms"] == pytest.approx(pred["tpot_s"] * 1000, rel=LIGHT_TPOT_TOLERANCE)
    # fixed lengths: ITL pools every gap, so its mean is the token-weighted TPOT = the mean TPOT
    assert summary["itl"]["mean_ms"] == pytest.approx(summary["tpot"]["mean_ms"], rel=1e-9)
    checked = {c["limit"]: c for c in simulated["sla"]}
    assert set(checked) == {"ttft_ms", "tpot_ms", "ttft_p99_ms"}
    assert checked["ttft_ms"]["measured_ms"] == summary["ttft"]["mean_ms"] and checked["ttft_ms"]["met"]
    assert checked["ttft_p99_ms"]["measured_ms"] == summary["ttft"]["p99_ms"]


def test_table_shows_itl_beside_tpot_and_the_sla_lines(invoke: Invoke, tmp_path: Path) -> None:
    run = invoke("simulate", str(_write(tmp_path, LIGHT)))
    assert run.exit_code == 0, run.output
    cells = [line.replace("│", " ").split() for line in run.stdout.splitlines()]
    rows = [c[0] for c in cells if c[:1] in (["TPOT"], ["ITL"])]
    assert rows == ["TPOT", "ITL"]
    assert "sla.ttft_ms 1,000 ms:" in run.stdout and "sla.ttft_p99_ms 2,000 ms:" in run.stdout


def test_predict_reads_a_simulate_file_with_an_arrival_section(invoke: Invoke, tmp_path: Path) -> None:
    predicted, simulated, run = _both(invoke, _write(tmp_path, WITH_ARRIVAL))
    # predict's lengths are the distributions' means: lognormal mean 800, uniform 20..200 -> 110
    assert (predicted["workload"]["input_tokens"], predicted["workload"]["output_tokens"]) == (800, 110)
    assert predicted["workload"]["rate_rps"] == 4
    assert simulated["summary"]["requests"] == 300 and run.stderr == ""


def test_an_older_simulate_file_runs_as_the_new_one_with_a_note(invoke: Invoke, tmp_path: Path) -> None:
    new_predicted, new_simulated, _ = _both(invoke, _write(tmp_path, WITH_ARRIVAL, "new.yaml"))
    old_predicted, old_simulated, run = _both(invoke, _write(tmp_path, OLD_SIMULATE, "old.yaml"))
    assert old_simulated == new_simulated  # seeded: the same requests, the same answer
    assert old_predicted == new_predicted
    notes = run.stderr.splitlines()
    assert len(notes) == 2 and all(n.startswith("note: ") for n in notes)
    assert "slo: is read as sla:" in notes[0] and "arrival:" in notes[1]


def test_derived_closed_loop_and_offline_traffic(invoke: Invoke, tmp_path: Path) -> None:
    loop = LIGHT.replace("{scenario: rate, input_tokens: 512, output_tokens: 64, rate_rps: 0.2}",
                         "{scenario: concurrency, input_tokens: 256, output_tokens: 32, concurrency: 40}")  # fmt: skip
    run = invoke("simulate", str(_write(tmp_path, loop)), "--format", "json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["summary"]["requests"] == 30 * 40  # REQUESTS_PER_CLIENT x clients
    offline = LIGHT.replace("scenario: rate", "scenario: offline").replace(", rate_rps: 0.2", "")
    offline += "arrival: {num_requests: 50}\n"
    out = tmp_path / "requests.csv"
    run = invoke("simulate", str(_write(tmp_path, offline)), "--trace-out", str(out), "--format", "json")
    assert run.exit_code == 0, run.output
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 50 and {float(r["arrival_s"]) for r in rows} == {0.0}


@pytest.mark.parametrize(
    ("command", "edit", "needle"),
    [
        ("simulate", ("sla:", "slo: {ttft_p99_ms: 5}\nsla:"), "sla and slo are both given"),
        ("predict", ("sla:", "slo: {ttft_p99_ms: 5}\nsla:"), "sla and slo are both given"),
        ("simulate", (", rate_rps: 0.2", ""), "workload.rate_rps is required for poisson arrivals"),
        ("simulate", ("rate_rps: 0.2", "rate_rps: -1"), "workload.rate_rps: Input should be greater than 0"),
        ("predict", ("rate_rps: 0.2", "rate_rps: -1"), "workload.rate_rps: Input should be greater than 0"),
        ("simulate", ("scenario: rate", "scenario: static_batch"), "workload.scenario static_batch"),
        ("simulate", ("sla:", "arrival: {rate_rps: 3}\nsla:"), "arrival.rate_rps (3) differs from workload"),
        (
            "predict",
            ("sla:", "arrival: {input_tokens: {kind: fixed, value: 900}}\nsla:"),
            "workload.input_tokens (512) is not the mean of arrival.input_tokens (900)",
        ),
        ("simulate", ("sla:", "simulation: {record_timeline: false}\nsla:"), "simulation.record_timeline"),
        (
            "simulate",
            (
                "sla: {ttft_ms: 1000, tpot_ms: 50, ttft_p99_ms: 2000}",
                "capacity_search: true\nsla: {ttft_ms: 9}",
            ),
            "capacity_search needs a P99",
        ),
        ("simulate", ("sla:", "arrival: {kind: trace}\nsla:"), "arrival.trace is required"),
        ("simulate", ("sla:", "arrival: {kind: burst}\nsla:"), "arrival.kind: Input should be"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    user_error: UserError, tmp_path: Path, command: str, edit: tuple[str, str], needle: str
) -> None:
    assert edit[0] in LIGHT
    line = user_error(command, str(_write(tmp_path, LIGHT.replace(edit[0], edit[1], 1))))
    assert needle in line, line


def test_predict_refuses_a_trace_only_document_naming_workload(user_error: UserError, tmp_path: Path) -> None:
    _write(tmp_path, "arrival_s,input_tokens,output_tokens\n0,10,5\n", "t.csv")
    text = "model: meta-llama/Llama-3.1-8B\nhardware: {gpu: H100-SXM}\narrival: {kind: trace, trace: t.csv}\n"
    path = _write(tmp_path, text)
    assert "workload: Field required" in user_error("predict", str(path))

"""The JSON API: each endpoint answers like the CLI's --format json, errors carry the CLI's one line,
and nothing a request can send produces a 500."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from gpuplan.interfaces.web.api import BOUND_HEADER, WEB_MAX_GPUS
from gpuplan.interfaces.web.app import MAX_BODY_BYTES, create_app, docs_assets

Invoke = Callable[..., Any]

RECOMMEND = {
    "model": "meta-llama/Llama-3.1-8B",
    "workload": {"input_tokens": 2048, "output_tokens": 300, "rate_rps": 20},
    "sla": {"ttft_ms": 1000, "tpot_ms": 50},
    "hardware": {"gpus": ["L4", "A10G", "L40S", "H100-SXM"]},
}
RECOMMEND_FLAGS = (
    "recommend",
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--input-tokens",
    "2048",
    "--output-tokens",
    "300",
    "--rate",
    "20",
    "--ttft-ms",
    "1000",
    "--tpot-ms",
    "50",
    "--gpus",
    "L4,A10G,L40S,H100-SXM",
)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def _cli_error(invoke: Invoke, *args: str) -> str:
    run = invoke(*args)
    assert run.exit_code != 0
    line: str = run.error_line()
    assert line.startswith("error: ")
    return line.removeprefix("error: ")


def _json(invoke: Invoke, *args: str) -> Any:
    run = invoke(*args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def test_recommend_equals_the_cli(client: TestClient, invoke: Invoke) -> None:
    answer = client.post("/api/recommend", json=RECOMMEND)
    assert answer.status_code == 200, answer.text
    assert answer.json() == _json(invoke, *RECOMMEND_FLAGS)
    assert answer.headers[BOUND_HEADER].startswith("max_gpus=64 (asked 64")


def test_recommend_at_a_confidence_equals_the_cli(client: TestClient, invoke: Invoke) -> None:
    answer = client.post("/api/recommend", json={**RECOMMEND, "confidence": 0.9})
    assert answer.status_code == 200, answer.text
    assert answer.json() == _json(invoke, *RECOMMEND_FLAGS, "--confidence", "0.9")
    assert answer.json()["confidence"] == 0.9
    bad = client.post("/api/recommend", json={**RECOMMEND, "confidence": 0.3})
    assert bad.status_code == 422 and bad.json()["field"] == "confidence"
    assert bad.json()["error"] == "confidence: Input should be greater than or equal to 0.5"


def test_oversized_search_is_bounded_and_says_so(client: TestClient) -> None:
    body = {**RECOMMEND, "hardware": {"max_gpus": 4096}, "precision": {"allowed": ["fp8"] * 500}}
    answer = client.post("/api/recommend", json=body)
    assert answer.status_code == 200, answer.text
    assert f"max_gpus={WEB_MAX_GPUS} (asked 4096" in answer.headers[BOUND_HEADER]
    assert any("Web API bound" in a and "4096" in a for a in answer.json()["assumptions"])
    assert all(p["count"] <= WEB_MAX_GPUS for p in answer.json()["plans"])


def test_plots_endpoint_returns_answer_bound_and_figures(client: TestClient) -> None:
    answer = client.post("/api/plots/recommend?cost_axis=usd_per_hour&latency_axis=tpot_ms", json=RECOMMEND)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["search"] == {
        "max_gpus_requested": 64,
        "max_gpus_searched": 64,
        "max_gpus_limit": WEB_MAX_GPUS,
        "time_limit_s": 30.0,
        "clamped": False,
    }
    assert set(data["figures"]) == {"pareto", "memory", "throughput"}
    assert data["figures"]["pareto"]["data"][0]["name"] == data["recommendation"]["plans"][0]["gpu"]
    bad = client.post("/api/plots/recommend?cost_axis=usd_per_year", json=RECOMMEND)
    assert bad.status_code == 422 and bad.json()["error"].startswith("query.cost_axis: Input should be")


def test_predict_and_fit_equal_the_cli(client: TestClient, invoke: Invoke, tmp_path: Any) -> None:
    scenario = {
        "model": "meta-llama/Llama-3.1-8B",
        "hardware": {"gpu": "L40S", "count": 2},
        "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 8},
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario), encoding="utf-8")  # JSON is YAML
    answer = client.post("/api/predict", json=scenario)
    assert answer.status_code == 200, answer.text
    assert answer.json() == _json(invoke, "predict", str(path))
    fit = client.post(
        "/api/fit", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "L4", "dtype": "fp8", "context": 8192}
    )
    assert fit.status_code == 200, fit.text
    cli = _json(
        invoke,
        "fit",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "L4",
        "--dtype",
        "fp8",
        "--context",
        "8192",
    )
    assert fit.json() == cli
    plot = client.post("/api/plots/fit", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "L4"})
    assert plot.status_code == 200 and plot.json()["figure"]["data"]


def test_catalog_endpoints_equal_the_cli(client: TestClient, invoke: Invoke) -> None:
    assert client.get("/api/gpus").json() == _json(invoke, "gpus")
    assert client.get("/api/models").json() == _json(invoke, "models")
    chart = client.get("/api/plots/gpus").json()
    assert {o["gpu"] for o in chart["offers"]} == {g["id"] for g in client.get("/api/gpus").json()["gpus"]}


@pytest.mark.parametrize("path", ["/api/recommend", "/api/predict"])
@pytest.mark.parametrize("value", [9000, "x"])
def test_a_limit_the_path_does_not_check_is_refused_at_its_field(
    client: TestClient, path: str, value: object
) -> None:
    """``e2e_p99_ms`` (which recommend and predict do not check) is refused as an unknown key, whatever
    its value, at ``sla.e2e_p99_ms``: the page points at the input it names."""
    body = {**RECOMMEND, "sla": {"ttft_ms": 1000, "e2e_p99_ms": value}}
    if path == "/api/predict":
        body["hardware"] = {"gpu": "H100-SXM"}
    answer = client.post(path, json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "sla.e2e_p99_ms"
    assert answer.json()["error"] == "sla.e2e_p99_ms: Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("flags", "body_change", "status", "field"),
    [
        (("--model", "no-such-model"), {"model": "no-such-model"}, 404, "model"),
        (("--gpus", "H100-SXMM"), {"hardware": {"gpus": ["H100-SXMM"]}}, 404, "GPU"),
        (
            ("--input-tokens", "-5"),
            {"workload": {"input_tokens": -5, "output_tokens": 300, "rate_rps": 20}},
            422,
            "workload.input_tokens",
        ),
        (("--dtypes", "fp9"), {"precision": {"allowed": ["fp9"]}}, 404, "dtype"),
        (("--ttft-ms", "-1"), {"sla": {"ttft_ms": -1}}, 422, "sla.ttft_ms"),
    ],
)
def test_errors_carry_the_cli_message(
    client: TestClient,
    invoke: Invoke,
    flags: tuple[str, ...],
    body_change: dict[str, Any],
    status: int,
    field: str,
) -> None:
    args = list(RECOMMEND_FLAGS)
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    answer = client.post("/api/recommend", json={**RECOMMEND, **body_change})
    assert answer.status_code == status, answer.text
    # the same rule in both; each names what its user typed: the CLI the flag, the page the field
    assert answer.json()["error"] == _cli_error(invoke, *args).replace(f"{flags[0]}:", f"{field}:", 1)
    assert answer.json()["field"] == field
    assert answer.json()["exit_code"] == 1


def test_infeasible_is_422_with_the_nearest_misses(client: TestClient, invoke: Invoke) -> None:
    answer = client.post("/api/recommend", json={**RECOMMEND, "hardware": {"gpus": ["L4"], "max_gpus": 1}})
    assert answer.status_code == 422
    args = [*RECOMMEND_FLAGS[:-1], "L4", "--max-gpus", "1"]
    assert answer.json()["error"] == _cli_error(invoke, *args) and "nearest misses" in answer.json()["error"]
    assert answer.json()["exit_code"] == 2


def test_model_names_are_never_paths(client: TestClient) -> None:
    for name in ("/etc/passwd", "../config.json", "~/.ssh"):
        answer = client.post("/api/recommend", json={**RECOMMEND, "model": name})
        assert answer.status_code == 404 and answer.json()["error"].startswith("unknown model")


def test_pasted_config_json_defines_the_model(client: TestClient) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    }
    answer = client.post("/api/recommend", json={**RECOMMEND, "model": "my/llama-1b", "config_json": config})
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "my/llama-1b"
    broken = client.post(
        "/api/recommend", json={**RECOMMEND, "model": "x", "config_json": {"hidden_size": 1}}
    )
    assert broken.status_code == 400 and broken.json()["field"] == "config_json"
    assert broken.json()["error"].startswith("config.json for x:")


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b"not json", 422),
        (b"[1, 2]", 422),
        (b'{"model": 5}', 422),
        (b"[" * 150_000 + b"]" * 150_000, 413),
        (b"[" * 50_000 + b"]" * 50_000, 400),
        (json.dumps({**RECOMMEND, "extra": 1}).encode(), 422),
        (
            json.dumps(
                {**RECOMMEND, "workload": {"input_tokens": 10**30, "output_tokens": 1, "rate_rps": 1}}
            ).encode(),
            422,
        ),
    ],
    ids=["not-json", "array", "wrong-type", "oversized", "deeply-nested", "unknown-key", "huge-int"],
)
def test_malformed_bodies_are_4xx_with_a_message(client: TestClient, content: bytes, status: int) -> None:
    answer = client.post("/api/recommend", content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] and "\n" not in answer.json()["error"]


def test_body_limit_without_content_length(client: TestClient) -> None:
    def chunks() -> Any:
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    answer = client.post("/api/recommend", content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413
    assert "256 KiB" in answer.json()["error"] or "262,144 bytes" in answer.json()["error"]


def test_page_docs_and_local_plotly(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/vendor/plotly.min.js" in page.text
    assert "cdn" not in page.text.lower()
    assert "script-src 'self'" in page.headers["content-security-policy"]
    js = client.get("/static/vendor/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert client.get("/static/app.js").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/api/recommend", "/api/predict", "/api/fit", "/api/gpus", "/api/models"} <= set(schema["paths"])
    assert client.get("/docs").status_code == 200
    missing = client.get("/api/nothing")
    assert missing.status_code == 404 and missing.json()["error"] == "Not Found"


SIMULATE: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": {"gpu": "H100-SXM", "count": 1},
    "workload": {
        "arrival": {"kind": "poisson", "rate_rps": 4},
        "input_tokens": {"kind": "fixed", "value": 512},
        "output_tokens": {"kind": "fixed", "value": 128},
        "num_requests": 300,
        "seed": 7,
    },
}


def test_simulate_matches_the_cli(client: TestClient, invoke: Invoke, tmp_path: Any) -> None:
    answer = client.post("/api/simulate", json=SIMULATE)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    path = tmp_path / "sim.yaml"
    path.write_text(json.dumps(SIMULATE), encoding="utf-8")  # JSON is YAML
    run = invoke("simulate", str(path), "--format", "json")
    assert run.exit_code == 0, run.output
    cli = json.loads(run.stdout)
    assert body["summary"] == cli["summary"]  # seeded: identical runs
    assert body["summary"]["completed"] == 300
    assert body["capacity"] is None


def test_simulate_refuses_trace_files_and_oversized_runs(client: TestClient) -> None:
    trace = {
        **SIMULATE,
        "workload": {**SIMULATE["workload"], "arrival": {"kind": "trace"}, "trace": "/etc/passwd"},
    }
    answer = client.post("/api/simulate", json=trace)
    assert answer.status_code in (400, 422)
    assert "trace files are not accepted" in answer.text
    big = {**SIMULATE, "workload": {**SIMULATE["workload"], "num_requests": 1_000_000}}
    answer = client.post("/api/simulate", json=big)
    assert answer.status_code == 422
    assert "num_requests" in answer.text


def test_simulate_never_reads_a_model_path(client: TestClient) -> None:
    answer = client.post("/api/simulate", json={**SIMULATE, "model": "/etc/passwd"})
    assert answer.status_code == 404
    assert "unknown model" in answer.text


TRAIN = {
    "model": "meta-llama/Llama-3.1-8B",
    "method": "lora",
    "tokens": 1e8,
    "seq_len": 4096,
    "gpus": ["L40S", "H100-SXM"],
    "max_gpus": 8,
}
TRAIN_FLAGS = (
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--method",
    "lora",
    "--tokens",
    "1e8",
    "--seq-len",
    "4096",
    "--gpus",
    "L40S,H100-SXM",
    "--max-gpus",
    "8",
)


def test_train_plan_equals_the_cli(client: TestClient, invoke: Invoke) -> None:
    answer = client.post("/api/train-plan", json=TRAIN)
    assert answer.status_code == 200, answer.text
    assert answer.json() == _json(invoke, "train-plan", *TRAIN_FLAGS)
    # recommend --task finetune ranks by cost unless told otherwise; train-plan by time
    assert answer.json() == _json(
        invoke, "recommend", "--task", "finetune", *TRAIN_FLAGS, "--objective", "time"
    )
    cheapest = client.post("/api/train-plan", json={**TRAIN, "objective": "cost"}).json()
    assert cheapest == _json(invoke, "recommend", "--task", "finetune", *TRAIN_FLAGS)
    assert answer.headers[BOUND_HEADER] == "max_gpus=8 (asked 8, limit 256); time_limit_s=30"


def test_train_plan_epochs_deadline_and_cost_equal_the_cli(client: TestClient, invoke: Invoke) -> None:
    body = {k: v for k, v in TRAIN.items() if k != "tokens"}
    body |= {"method": "full", "epochs": 2, "samples": 5000, "deadline_hours": 50, "objective": "cost"}
    answer = client.post("/api/train-plan", json=body)
    assert answer.status_code == 200, answer.text
    flags = [*TRAIN_FLAGS[:2], "--method", "full", *TRAIN_FLAGS[6:], "--epochs", "2", "--samples", "5000"]
    cli = _json(invoke, "train-plan", *flags, "--deadline-hours", "50", "--objective", "cost")
    assert answer.json() == cli
    assert answer.json()["method"] == "full_ft" and answer.json()["tokens"] == 2 * 5000 * 4096


def test_train_plan_plots_return_the_answer_bound_memory_and_figures(client: TestClient) -> None:
    answer = client.post("/api/plots/train-plan", json=TRAIN)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["result"] == client.post("/api/train-plan", json=TRAIN).json()
    assert data["search"]["max_gpus_searched"] == 8 and data["search"]["clamped"] is False
    assert set(data["figures"]) == {"pareto", "memory"}
    plans = data["result"]["plans"]
    points = [t for t in data["figures"]["pareto"]["data"] if t["mode"] == "markers"]
    assert sum(len(t["x"]) for t in points) == len(plans)
    assert points[0]["name"] == plans[0]["gpu"]
    assert [(m["gpu"], m["gpus"], m["layout"]) for m in data["memory"]] == [
        (p["gpu"], p["gpus"], p["layout"]) for p in plans[:5]
    ]
    assert data["memory"][0]["memory"]["total_bytes"] / 2**30 == pytest.approx(plans[0]["memory_gib_per_gpu"])


@pytest.mark.parametrize(
    ("flags", "body_change", "status", "field"),
    [
        (("--method", "xx"), {"method": "xx"}, 400, "method"),
        (("--tokens", None), {"tokens": None}, 400, "tokens"),
        (("--seq-len", "-3"), {"seq_len": -3}, 400, "seq_len"),
        (("--tokens", "0"), {"tokens": 0}, 400, "tokens"),
        (("--max-gpus", "0"), {"max_gpus": 0}, 400, "max_gpus"),
        (("--objective", "fast"), {"objective": "fast"}, 400, "objective"),
        (("--gpus", "H100-SXMM"), {"gpus": ["H100-SXMM"]}, 404, "GPU"),
        (("--dtype", "fp9"), {"dtype": "fp9"}, 400, None),
    ],
    ids=["method", "no-tokens", "seq-len", "zero-tokens", "max-gpus", "objective", "gpu", "dtype"],
)
def test_train_plan_errors_carry_the_cli_message(
    client: TestClient,
    invoke: Invoke,
    flags: tuple[str, str | None],
    body_change: dict[str, Any],
    status: int,
    field: str | None,
) -> None:
    args = ["train-plan", *TRAIN_FLAGS]
    flag, value = flags
    if flag in args:
        at = args.index(flag)
        args[at : at + 2] = [] if value is None else [flag, value]
    else:
        args += [flag, value or ""]
    body = {k: v for k, v in {**TRAIN, **body_change}.items() if v is not None}
    answer = client.post("/api/train-plan", json=body)
    assert answer.status_code == status, answer.text
    cli = _cli_error(invoke, *args)  # names the flag where the page names the field
    expected = cli.replace(f"{flag}:", f"{field}:", 1) if field else cli
    assert answer.json() == {"error": expected, "field": field, "exit_code": 1}


def test_train_plan_infeasible_is_422_with_the_cli_message(client: TestClient, invoke: Invoke) -> None:
    body = {**TRAIN, "method": "full", "gpus": ["L4"], "max_gpus": 1}
    answer = client.post("/api/train-plan", json=body)
    assert answer.status_code == 422
    flags = [*TRAIN_FLAGS[:2], "--method", "full", *TRAIN_FLAGS[4:8], "--gpus", "L4", "--max-gpus", "1"]
    assert answer.json()["error"] == _cli_error(invoke, "train-plan", *flags)
    assert answer.json()["exit_code"] == 2


def test_train_plan_search_is_bounded_and_says_so(client: TestClient) -> None:
    body = {**TRAIN, "gpus": ["H100-SXM", "H100-SXM"] * 100, "max_gpus": 4096}
    answer = client.post("/api/plots/train-plan", json=body)
    assert answer.status_code == 200, answer.text
    assert f"max_gpus={WEB_MAX_GPUS} (asked 4096" in answer.headers[BOUND_HEADER]
    assert answer.json()["search"]["clamped"] is True
    plans = answer.json()["result"]["plans"]
    assert all(p["gpus"] <= WEB_MAX_GPUS for p in plans)
    assert len({(p["gpu"], p["gpus"]) for p in plans}) == len(plans)  # duplicate GPU ids searched once


@pytest.mark.parametrize(
    "body",
    [
        {**TRAIN, "model": "/etc/passwd"},
        {**TRAIN, "config_json": {"model_type": "llama"}},
        {**TRAIN, "seq_len": "long"},
        {**TRAIN, "tokens": "1e999"},
        {k: v for k, v in TRAIN.items() if k != "tokens"} | {"epochs": 1e300, "samples": 10**9},
        {**TRAIN, "deadline_hours": "inf"},
    ],
    ids=["path", "config-json", "wrong-type", "inf-tokens", "inf-epochs-x-samples", "inf-deadline"],
)
def test_train_plan_rejects_paths_and_malformed_bodies(client: TestClient, body: dict[str, Any]) -> None:
    answer = client.post("/api/train-plan", json=body)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"] and "\n" not in answer.json()["error"]


def test_docs_work_offline(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200
        if docs_assets() is None:
            pytest.skip("fastapi-offline is not installed: /docs and /redoc load their assets from a CDN")
        assert "http://" not in html.text and "https://" not in html.text, html.text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert assets and all(a.startswith("/static/apidocs/") for a in assets)
        for asset in assets:
            assert client.get(asset).status_code == 200, asset
    assert "/api/train-plan" in client.get("/openapi.json").json()["paths"]


def test_recommend_p99_limits_answer_like_the_cli(client: TestClient, invoke: Invoke) -> None:
    doc = {**RECOMMEND, "sla": {"ttft_p99_ms": 1500, "tpot_p99_ms": 80}, "hardware": {"gpus": ["L4"]}}
    doc["workload"] = {"input_tokens": 512, "output_tokens": 128, "rate_rps": 8}
    doc["prices"] = {"provider": "AWS"}  # the GPU clouds of the default basis do not rent the L4
    web = client.post("/api/recommend", json=doc)
    assert web.status_code == 200, web.text
    flags = [
        "recommend",
        "--model",
        doc["model"],
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--rate",
        "8",
        "--ttft-p99-ms",
        "1500",
        "--tpot-p99-ms",
        "80",
        "--gpus",
        "L4",
        "--provider",
        "AWS",
        "--format",
        "json",
    ]
    cli = json.loads(invoke(*flags).stdout)
    assert web.json()["plans"] == cli["plans"]
    assert all(p["sized_on"] == "p99" for p in cli["plans"])


P99_DOC = {
    **RECOMMEND,
    "sla": {"ttft_p99_ms": 1500, "tpot_p99_ms": 80},
    "hardware": {"gpus": ["L40S"]},  # rented on the default price basis (the L4 is not)
    "workload": {"input_tokens": 512, "output_tokens": 128, "rate_rps": 8},
}


def _chart_latency_by_rank(figure: dict[str, Any]) -> dict[int, float]:
    """Each plotted plan's latency (y) by its rank (the '3. ...' hover label)."""
    points: dict[int, float] = {}
    for trace in figure["data"]:
        if trace["name"] == "Pareto front":
            continue
        for label, y in zip(trace["text"], trace["y"], strict=True):
            points[int(label.split(".")[0])] = y
    return points


@pytest.mark.parametrize(
    ("doc", "axis", "statistic", "field", "title"),
    [
        (RECOMMEND, "ttft_ms", "mean", "ttft_ms", "mean TTFT"),
        (P99_DOC, "ttft_ms", "p99", "ttft_p99_ms", "P99 TTFT"),
        (P99_DOC, "tpot_ms", "p99", "tpot_p99_ms", "P99 TPOT"),
    ],
)
def test_chart_and_table_show_the_same_latency_statistic(
    client: TestClient, doc: dict[str, Any], axis: str, statistic: str, field: str, title: str
) -> None:
    """The page's table shows P99 columns when plans are sized on P99s; the cost-vs-latency chart of the
    same response draws those same P99s (not the means), and its axis says which statistic it is."""
    answer = client.post(f"/api/plots/recommend?latency_axis={axis}", json=doc)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    plans = data["recommendation"]["plans"]
    assert (data["latency_statistic"], data["latency_field"]) == (statistic, field)
    assert all(p["sized_on"] == statistic for p in plans)
    chart = _chart_latency_by_rank(data["figures"]["pareto"])
    assert chart == {rank: p[field] for rank, p in enumerate(plans, start=1)}
    assert data["figures"]["pareto"]["layout"]["yaxis"]["title"]["text"].startswith(title)
    if statistic == "p99":  # the means differ, so a chart of means would not pass the check above
        assert any(p[field] != p[axis] for p in plans)

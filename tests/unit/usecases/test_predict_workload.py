"""``predict`` reads a scenario's workload as written: its kind's load (one request per replica when left
out), and echoes the section as given."""

from __future__ import annotations

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.usecases.predict import predict_from_scenario


def _predict(workload: dict[str, object], replicas: int = 1) -> tuple[dict[str, object], dict[str, object]]:
    sc = ScenarioFile.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "hardware": {"gpu": "H100-SXM", "count": replicas},
            "parallelism": {"tp": 1},
            "workload": {"input_tokens": 512, "output_tokens": 128, **workload},
        }
    )
    result = predict_from_scenario(sc, default_catalog()).model_dump(mode="json")
    return result["workload"], result["prediction"]


def test_a_closed_loop_without_its_load_runs_one_request_per_replica() -> None:
    echo, loose = _predict({"rate_rps": 5, "batch_size": 3}, replicas=2)  # neither is the kind's load
    assert echo == {
        "scenario": "concurrency",
        "input_tokens": 512,
        "output_tokens": 128,
        "concurrency": None,
        "batch_size": 3.0,
        "rate_rps": 5.0,
        "prefix_cache_hit_rate": 0.0,
    }
    assert loose == _predict({"concurrency": 2}, replicas=2)[1]
